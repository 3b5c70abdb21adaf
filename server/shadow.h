// Shadow traffic (traffic_split.shadow in the model config): a copy of a share of a model's
// predict requests also runs on a candidate version, off the request's path, on threads of
// its own. The candidate's answer is compared with the one the client got and recorded in the
// metrics (agree, disagree, error; its latency), never returned. The queue is bounded: when
// the candidate cannot keep up, copies are dropped (and counted), never the primary slowed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "model_store/manager.h"
#include "runtime/session.h"
#include "server/serving_metrics.h"

namespace lockstep {

// Whether the candidate's outputs answer as the primary's did: for every output the primary
// returned, one of the same name, dtype and shape whose floats are within 1e-5 relative (at
// least 1e-5 absolute) and whose other values are equal.
bool ShadowAgrees(std::span<const NamedTensor> primary, std::span<const NamedTensor> candidate);

class ShadowRunner {
 public:
  ShadowRunner(ServingMetrics& metrics, int threads = 1, size_t max_queue = 256);
  ~ShadowRunner();  // drops what is queued, finishes what runs
  ShadowRunner(const ShadowRunner&) = delete;
  ShadowRunner& operator=(const ShadowRunner&) = delete;

  struct Task {
    ServableHandle candidate;
    std::string signature;
    std::vector<NamedTensor> inputs;
    std::vector<NamedTensor> primary;  // what the client got
  };

  // After a predict that `served` answered: draws whether the model's shadow sees this request
  // (ModelManager::ShadowFor) and, if so, queues a copy. Cheap when it does not.
  void MaybeShadow(const ModelManager& manager, const LoadedVersion& served, const Signature& signature,
                   std::span<const NamedTensor> inputs, std::span<const NamedTensor> primary);

 private:
  void Loop();
  void Run(Task& task);

  ServingMetrics& metrics_;
  const size_t max_queue_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace lockstep
