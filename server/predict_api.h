// TensorFlow Serving's Predict on its protobuf messages, gRPC's transport aside: what a Predict
// call does between its request's arrival and its answer. The request's tensors are decoded
// into the call's own (pooled) tensors, the graph runs alone or in a batch, and the outputs are
// written into the response in place, so that a warmed-up call of a repeated shape allocates
// nothing (tests/alloc counts it).
//
// The answer is the same as TF Serving's: outputs keyed by alias (only those output_filter
// names, when it names any), model_spec naming the model, version and signature that served.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/batching/batch_scheduler.h"
#include "server/health.h"
#include "server/request_log/request_logger.h"
#include "server/serving_metrics.h"
#include "server/shadow.h"
#include "tensorflow_serving/apis/predict.pb.h"

namespace lockstep {

class PredictApi;

// The inputs `request` gives `signature`, in the signature's order, into `inputs` (their
// tensors reused where the shape repeats): every input present, none unknown, and all of them
// within one byte budget (kMaxRequestTensorBytes).
Status DecodePredictInputs(const tensorflow::serving::PredictRequest& request, const Signature& signature,
                           std::vector<NamedTensor>* inputs);

// What the transport hands over: the messages (the response may hold the last call's answer,
// which is overwritten), the routing key and the deadline. All must stay valid until the call
// is answered.
struct PredictArgs {
  const tensorflow::serving::PredictRequest* request = nullptr;
  tensorflow::serving::PredictResponse* response = nullptr;
  std::string_view routing_key;  // keeps a client on one arm of a traffic split; empty: none
  std::string_view request_id;   // the client's (x-request-id); empty: none
  // Past it the request is not run (it waited too long in a batch queue).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// One Predict in flight. The transport's: it reuses its calls from request to request, and
// with them the capacity of their tensors. While it waits for a batch, the call is its batch
// task, and no thread waits with it.
class PredictCall : public BatchTask {
 protected:
  PredictCall() = default;
  ~PredictCall() = default;

 private:
  friend class PredictApi;
  // The answer: `status`, and on success the response. Called once per PredictApi::Start, on
  // the thread that called Start before Start returns, or later on a batch thread; the call is
  // free for its next request once it is called.
  virtual void OnAnswered(const Status& status) = 0;
  void OnBatchDone(Status status) final;

  // Decodes and starts the run; an error is the call's answer. Once the run has started, the
  // call is its batch task's, and may be answered before this returns.
  Status StartRun();
  Status WriteResponse();
  // Records the call, lets go of what it held and answers it: the last thing the call does.
  void Answer(const Status& status);

  const PredictApi* api_ = nullptr;
  PredictArgs args_;
  std::chrono::steady_clock::time_point start_;
  RequestRecord record_;
  const Signature* signature_ = nullptr;
  std::vector<NamedTensor> inputs_;
  std::vector<NamedTensor> outputs_;
  std::vector<std::string> filter_;
};

class PredictApi {
 public:
  // Calls are recorded in `metrics`. Once `health` is draining, new calls are answered
  // UNAVAILABLE at once. `shadow` gets the predicts a shadow should see. With `batching`
  // (null: off), predicts run in batches.
  PredictApi(const ModelManager& manager, ServingMetrics& metrics, const ServerHealth& health, ShadowRunner& shadow,
             BatchScheduler* batching)
      : manager_(manager), metrics_(metrics), health_(health), shadow_(shadow), batching_(batching) {}

  // Serves `args` into `call`, whose OnAnswered says when the answer is there. Thread-safe.
  void Start(const PredictArgs& args, PredictCall* call) const;
  // Answered predicts are offered to `logger` (logging_config). Before the first Start.
  void set_request_logger(RequestLogger* logger) { logger_ = logger; }

 private:
  friend class PredictCall;
  const ModelManager& manager_;
  ServingMetrics& metrics_;
  const ServerHealth& health_;
  ShadowRunner& shadow_;
  BatchScheduler* const batching_;
  RequestLogger* logger_ = nullptr;
};

}  // namespace lockstep
