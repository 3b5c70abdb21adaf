// TensorFlow Serving's gRPC services over the model store: PredictionService (Predict,
// Classify, Regress, MultiInference, GetModelMetadata) and ModelService (GetModelStatus,
// HandleReloadConfigRequest). Errors are gRPC status codes with the same messages as REST
// (both go through server/inference.h and server/model_info.h).
//
// Both are on gRPC's callback API: a call holds no thread of its own. A call is served on the
// gRPC thread that received it, and a Predict, Classify, Regress or MultiInference that waits
// for a batch gives that thread back: the batch thread that runs its batch writes its answer. A Predict's messages and its call
// (predict_api.h) are pooled, so that a warmed-up Predict of a repeated shape allocates
// nothing of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/admin_access.h"
#include "server/batching/batch_scheduler.h"
#include "server/health.h"
#include "server/pooled_message_allocator.h"
#include "server/predict_api.h"
#include "server/serving_metrics.h"
#include "server/shadow.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace lockstep {

grpc::Status ToGrpcStatus(const Status& status);

// What every service's calls share (TF Serving's and the v2 protocol's):
// A call whose gRPC deadline has passed is not run (as TF Serving's RunOptions timeout).
Status CheckStillWanted(const grpc::ServerContextBase& context);
// The call's deadline on the steady clock, which the batch queues use; max when it has none.
std::chrono::steady_clock::time_point SteadyDeadline(const grpc::ServerContextBase& context);
// The value of the client's metadata `key` (a view into the call's metadata), or empty.
std::string_view ClientMetadata(const grpc::ServerContextBase& context, const char* key);
// The x-routing-key metadata, which keeps a client on one arm of a traffic split.
std::string_view RoutingKey(const grpc::ServerContextBase& context);
// The call's gRPC status. A failed call gets a request id (the client's x-request-id metadata,
// else a new one) in its trailing metadata and in the log line about it; 5xx-like failures
// are warnings.
grpc::Status FinishCall(grpc::ServerContextBase* context, std::string_view method, const Status& status);
// Finishes a unary call on its default reactor now, as FinishCall words it; the handler returns
// the reactor.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, std::string_view method,
                                    const Status& status);

// A service's calls kept for reuse: a steady load reuses them and, with them, their tensors.
template <typename Call>
class CallPool {
 public:
  // A pooled call, or a new one made of `args`.
  template <typename... Args>
  std::unique_ptr<Call> Acquire(Args&... args) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        std::unique_ptr<Call> call = std::move(pool_.back());
        pool_.pop_back();
        return call;
      }
    }
    return std::make_unique<Call>(args...);
  }
  void Release(std::unique_ptr<Call> call) {
    std::lock_guard<std::mutex> lock(mu_);
    pool_.push_back(std::move(call));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Call>> pool_;
};

class PredictionServiceImpl final : public tensorflow::serving::PredictionService::CallbackService {
 public:
  // Inference calls are recorded in `metrics`. Once `health` is draining, new calls are
  // answered UNAVAILABLE at once (a client may retry them elsewhere), and in_flight() tells the
  // drain when the calls already running are done.
  // `shadow` gets the predicts a shadow should see. With `batching` (null: off), inference
  // runs in batches.
  PredictionServiceImpl(const ModelManager& manager, ServingMetrics& metrics, const ServerHealth& health,
                        ShadowRunner& shadow, BatchScheduler* batching);
  ~PredictionServiceImpl() override;

  int in_flight() const { return in_flight_.load(); }
  // Answered calls are offered to `logger` (logging_config). Before the server starts.
  void set_request_logger(RequestLogger* logger) {
    logger_ = logger;
    predict_.set_request_logger(logger);
  }

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const tensorflow::serving::PredictRequest* request,
                                    tensorflow::serving::PredictResponse* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const tensorflow::serving::ClassificationRequest* request,
                                     tensorflow::serving::ClassificationResponse* response) override;
  grpc::ServerUnaryReactor* Regress(grpc::CallbackServerContext* context,
                                    const tensorflow::serving::RegressionRequest* request,
                                    tensorflow::serving::RegressionResponse* response) override;
  grpc::ServerUnaryReactor* MultiInference(grpc::CallbackServerContext* context,
                                           const tensorflow::serving::MultiInferenceRequest* request,
                                           tensorflow::serving::MultiInferenceResponse* response) override;
  grpc::ServerUnaryReactor* GetModelMetadata(grpc::CallbackServerContext* context,
                                             const tensorflow::serving::GetModelMetadataRequest* request,
                                             tensorflow::serving::GetModelMetadataResponse* response) override;

 private:
  class GrpcPredictCall;

  class ExamplesCall;

  // Serves a Classify, Regress or MultiInference call, readied by `prepare(record, run)`:
  // counted in flight, refused while draining, recorded in the metrics; once answered, logged
  // (when drawn) as `log(served, record)` builds it.
  using LogBuilder = std::function<void(const LoadedVersion&, tensorflow::serving::PredictionLog*)>;
  template <typename Prepare>
  grpc::ServerUnaryReactor* StartExamples(grpc::CallbackServerContext* context, std::string_view method,
                                          std::string_view api, Prepare&& prepare, LogBuilder log);

  const ModelManager& manager_;
  ServingMetrics& metrics_;
  const ServerHealth& health_;
  BatchScheduler* const batching_;
  RequestLogger* logger_ = nullptr;
  PredictApi predict_;
  PooledMessageAllocator<tensorflow::serving::PredictRequest, tensorflow::serving::PredictResponse>
      predict_messages_;
  std::atomic<int> in_flight_{0};
  CallPool<GrpcPredictCall> pool_;  // Predict's calls, back once answered
};

// Applies a ModelServerConfig the way --model_config_file does; OK or why it was refused.
using ReloadConfigFn = std::function<Status(const tensorflow::serving::ModelServerConfig&)>;

class ModelServiceImpl final : public tensorflow::serving::ModelService::CallbackService {
 public:
  ModelServiceImpl(const ModelManager& manager, ReloadConfigFn reload)
      : manager_(manager), reload_(std::move(reload)) {}
  // Who may reload the config (default: loopback peers only). Before the server starts.
  void set_admin_access(AdminAccess access) { admin_ = std::move(access); }

  grpc::ServerUnaryReactor* GetModelStatus(grpc::CallbackServerContext* context,
                                           const tensorflow::serving::GetModelStatusRequest* request,
                                           tensorflow::serving::GetModelStatusResponse* response) override;
  // Runs the reload on the gRPC thread that received it, for as long as the loads take: a
  // rare operator's call, while the other calls go on on gRPC's other threads.
  grpc::ServerUnaryReactor* HandleReloadConfigRequest(grpc::CallbackServerContext* context,
                                                      const tensorflow::serving::ReloadConfigRequest* request,
                                                      tensorflow::serving::ReloadConfigResponse* response) override;

 private:
  const ModelManager& manager_;
  const ReloadConfigFn reload_;
  AdminAccess admin_;
};

}  // namespace lockstep
