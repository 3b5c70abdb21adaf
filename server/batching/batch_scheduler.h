// Dynamic batching, as TensorFlow Serving's --enable_batching: requests for the same model
// version and signature that arrive close together are merged along their first (batch)
// dimension, run as one graph run, and each gets its own rows of the outputs back. On a CPU a
// batch of 64 rows costs little more than one row (the weights are read once), so under load
// the server answers several times as many requests with no worse tail latency.
//
// How a batch forms. Each (version, signature) has a FIFO queue, and num_batch_threads
// threads serve all the queues. A queue is ready when its head has waited batch_timeout, when
// it holds max_batch_size rows, or at once with a timeout of 0 (then batches grow with the
// load: what queues while one batch runs forms the next). Of the ready queues, the one whose
// head waited longest goes first. The batch takes the head, then the requests after it, in
// order, that fit in max_batch_size and can share the head's batch (the same inner
// dimensions, or any with pad_variable_length_inputs; batch_tensors.h); a request of another
// shape stays queued for a later batch. The batch is padded up to the smallest of
// allowed_batch_sizes.
//
// Refusals, each at once and to the one request only (and when a batch of several fails, each
// of its requests runs again alone, so that an error is only ever its own request's):
//   - a request with more rows than max_batch_size: InvalidArgument;
//   - a request that finds max_enqueued_batches x max_batch_size rows queued before it:
//     ResourceExhausted (HTTP 429), so that latency cannot grow without bound;
//   - a request whose deadline passed while it queued: DeadlineExceeded, and it is not run;
//   - inputs that fail the signature's checks: those checks' errors, before it queues.
// A signature with an input or output whose first dimension is not variable cannot be
// batched; its requests run alone, as without batching.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "model_store/manager.h"
#include "runtime/session.h"
#include "runtime/status.h"

namespace lockstep {

// TensorFlow Serving's BatchingParameters, as values (batching_parameters.h reads its files).
// The defaults are TF Serving's batch scheduler's.
struct BatchingOptions {
  int64_t max_batch_size = 1000;
  std::chrono::microseconds batch_timeout{0};
  int64_t max_enqueued_batches = 10;
  // Increasing, the last equal to max_batch_size. Empty: batches run at the rows they have.
  std::vector<int64_t> allowed_batch_sizes;
  bool pad_variable_length_inputs = false;

  bool operator==(const BatchingOptions&) const = default;
};

// One batch that ran, for the metrics.
struct BatchRun {
  const LoadedVersion* servable;
  std::string_view signature;
  int64_t rows;         // the requests' rows
  int64_t padded_rows;  // the rows run (rows plus padding)
  size_t requests;
};

struct BatchQueueDepth {
  std::string model;
  int64_t version = 0;
  std::string signature;
  int64_t requests = 0;  // queued, not yet in a running batch
};

class BatchTask;

class BatchScheduler {
 public:
  // Called on a batch thread after each batch ran (successfully or not). Must not block.
  using BatchObserver = std::function<void(const BatchRun&)>;

  // Starts `num_threads` batch threads (at least 1). Every model gets `defaults` unless
  // SetModelOptions says otherwise.
  BatchScheduler(int num_threads, BatchingOptions defaults, BatchObserver observer);
  ~BatchScheduler();  // Stop()
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Options for the models named (the others get the defaults), from the next batch formed on.
  void SetModelOptions(std::map<std::string, BatchingOptions, std::less<>> per_model);

  // How long one request waited in its queue and how long its batch ran.
  struct Timing {
    double queue_seconds = 0;
    double compute_seconds = 0;
  };

  // Queues `task`, a request to run `signature` (a signature of `servable`'s session) on
  // `inputs` as part of a batch, filling `outputs` as Session::Run would, and returns without
  // waiting: the task's OnBatchDone gets the result, on the batch thread that ran it (so a
  // waiting request holds no thread), or before Submit returns when the request is refused or
  // runs alone. `inputs` are in the signature's order (as the request decoders give them);
  // others run alone. The task, the inputs and the outputs must live until OnBatchDone; the
  // caller must not touch the task after Submit. Submit throws nothing itself (running out of
  // memory is the task's answer). Thread-safe.
  void Submit(const ServableHandle& servable, const Signature& signature, std::span<const NamedTensor> inputs,
              std::vector<NamedTensor>* outputs, std::chrono::steady_clock::time_point deadline, BatchTask* task);

  // Runs `task`'s request at once on the calling thread, alone, and answers it before
  // returning: what Submit does for a request that cannot be batched, for callers that run
  // without batching.
  static void RunNow(const Session& session, const Signature& signature, std::span<const NamedTensor> inputs,
                     std::vector<NamedTensor>* outputs, BatchTask* task);

  // Submit, then waits for the result: for callers that have a thread to spare.
  Status Run(const ServableHandle& servable, const Signature& signature, std::span<const NamedTensor> inputs,
             std::vector<NamedTensor>* outputs, std::chrono::steady_clock::time_point deadline,
             Timing* timing);

  // What waits in each queue now.
  std::vector<BatchQueueDepth> QueueDepths() const;

  // Refuses new requests (Unavailable), answers the queued ones Unavailable, lets the running
  // batches finish and joins the threads (idempotent). Call it once nothing will call Run.
  void Stop();

 private:
  struct Queue;
  struct Buffers;

  // Queues `task` (true), or says it runs alone (false) or is refused (the error).
  StatusOr<bool> Enqueue(const ServableHandle& servable, const Signature& signature, BatchTask* task);
  void BatchLoop();
  // The ready queue whose head waited longest, or null; `wake` becomes the earliest time a
  // queue will be ready. Forgets empty queues of versions that are gone.
  std::shared_ptr<Queue> PickReadyLocked(std::chrono::steady_clock::time_point now,
                                         std::chrono::steady_clock::time_point* wake);
  // Runs the batch of `first` and the tasks linked after it, whose inputs merge into `shapes`.
  void RunBatch(const Queue& queue, const BatchingOptions& options, std::span<const Shape> shapes,
                BatchTask* first, int64_t rows, Buffers& buffers);
  std::shared_ptr<const BatchingOptions> OptionsForLocked(std::string_view model) const;

  const std::shared_ptr<const BatchingOptions> defaults_;
  const BatchObserver observer_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::map<std::string, std::shared_ptr<const BatchingOptions>, std::less<>> per_model_;
  // Keyed by the signature, whose address is unique while its version lives; each queue also
  // checks that its version still lives before it is reused.
  std::unordered_map<const Signature*, std::shared_ptr<Queue>> queues_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::once_flag stop_once_;
};

// One request's place in a batch, owned by the request's own state (a gRPC call, an HTTP
// connection), so that queueing allocates nothing and a waiting request needs no thread.
class BatchTask {
 public:
  // Filled before OnBatchDone.
  const BatchScheduler::Timing& timing() const { return timing_; }

 protected:
  BatchTask() = default;
  ~BatchTask() = default;
  BatchTask(const BatchTask&) = delete;
  BatchTask& operator=(const BatchTask&) = delete;

 private:
  friend class BatchScheduler;
  // The request's result, exactly once. It runs on a batch thread, which serves the other
  // queues once it returns: it may answer the client, not wait for anything.
  virtual void OnBatchDone(Status status) = 0;

  std::span<const NamedTensor> inputs_;
  std::vector<NamedTensor>* outputs_ = nullptr;
  int64_t rows_ = 0;
  std::chrono::steady_clock::time_point enqueued_;
  std::chrono::steady_clock::time_point deadline_;
  BatchScheduler::Timing timing_;
  BatchTask* next_ = nullptr;  // the queue's or the batch's next task
};

}  // namespace lockstep
