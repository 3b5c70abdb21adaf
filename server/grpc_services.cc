#include "server/grpc_services.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "server/inference.h"
#include "server/model_info.h"
#include "server/request_id.h"
#include "server/request_log/prediction_logs.h"
#include "server/status_mapping.h"
#include "runtime/saved_model/tensor_proto.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

// The gRPC deadline bounds the request as TF Serving's RunOptions timeout does: a request
// whose deadline has passed is not run.
Status CheckStillWanted(const grpc::ServerContextBase& context) {
  if (context.deadline() < std::chrono::system_clock::now()) {
    return Status(StatusCode::kDeadlineExceeded, "the request's deadline passed before it could run");
  }
  return Status::Ok();
}

// The call's deadline on the steady clock, which the batch queues use (gRPC's is on the system
// clock); none (max) when the client set none.
std::chrono::steady_clock::time_point SteadyDeadline(const grpc::ServerContextBase& context) {
  const auto left = context.deadline() - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

// The value of the client's metadata `key` (a view into the call's metadata), or empty.
std::string_view ClientMetadata(const grpc::ServerContextBase& context, const char* key) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(key);
  return it == metadata.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
}

// The key that keeps a client on one arm of a traffic split.
std::string_view RoutingKey(const grpc::ServerContextBase& context) { return ClientMetadata(context, "x-routing-key"); }

// A failed call gets a request id (the client's x-request-id metadata, else a new one) in its
// trailing metadata and in the log line about it; 5xx-like failures are warnings.
grpc::Status FinishCall(grpc::ServerContextBase* context, std::string_view method, const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string id(ClientMetadata(*context, "x-request-id"));
  if (!IsUsableRequestId(id)) id = NewRequestId();
  context->AddTrailingMetadata("x-request-id", id);
  const bool server_side = HttpStatusFor(status.code()) >= 500;
  spdlog::log(server_side ? spdlog::level::warn : spdlog::level::debug,
              "event=grpc_error request_id={} method={} code={} error=\"{}\"", id, method,
              StatusCodeName(status.code()), status.message());
  return ToGrpcStatus(status);
}

// Finishes a call on its default reactor now, as Finish words it; the handler returns the reactor.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, std::string_view method,
                                    const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(FinishCall(context, method, status));
  return reactor;
}

namespace {

// Classify or Regress: resolves the servable (into `record`) and its signature, and readies
// `run` to write into `result`; `served_spec` names what serves it.
template <typename Result>
Status PrepareExamples(const ModelManager& manager, const grpc::ServerContextBase& context,
                       const tfs::ModelSpec& model_spec, const tfs::Input& input, Result* result,
                       tfs::ModelSpec* served_spec, RequestRecord* record, ExamplesRun* run) {
  LS_ASSIGN_OR_RETURN(ServableRequest spec, ServableRequestFromSpec(model_spec));
  spec.routing_key = RoutingKey(context);
  LS_ASSIGN_OR_RETURN(record->servable, ResolveServable(manager, spec));
  LS_ASSIGN_OR_RETURN(const Signature* signature,
                      FindServingSignature(record->servable->session(), spec.signature_name));
  record->signature = signature->name;
  LS_RETURN_IF_ERROR(CheckStillWanted(context));
  run->Begin(input);
  if constexpr (std::is_same_v<Result, tfs::ClassificationResult>) {
    run->AddClassify(*signature, result);
  } else {
    run->AddRegress(*signature, result);
  }
  FillServedSpec(*record->servable, spec.signature_name, served_spec);
  return Status::Ok();
}

// MultiInference as TF Serving defines it: classify and regress tasks over one input, all on
// one model (and version), each on its own signature.
Status PrepareMultiInference(const ModelManager& manager, const grpc::ServerContextBase& context,
                             const tfs::MultiInferenceRequest& request, tfs::MultiInferenceResponse* response,
                             RequestRecord* record, ExamplesRun* run) {
  LS_RETURN_IF_ERROR(CheckMultiInferenceTasks(request));
  // Resolve once, so that every task runs on the same version even if a newer one arrives.
  LS_ASSIGN_OR_RETURN(ServableRequest first, ServableRequestFromSpec(request.tasks(0).model_spec()));
  first.routing_key = RoutingKey(context);
  LS_ASSIGN_OR_RETURN(record->servable, ResolveServable(manager, first));
  const Session& session = record->servable->session();
  LS_RETURN_IF_ERROR(CheckStillWanted(context));
  run->Begin(request.input());
  for (const tfs::InferenceTask& task : request.tasks()) {
    LS_ASSIGN_OR_RETURN(const Signature* signature, FindServingSignature(session, task.model_spec().signature_name()));
    tfs::InferenceResult* result = response->add_results();
    if (task.method_name() == kClassifyMethod) {
      run->AddClassify(*signature, result->mutable_classification_result());
    } else {
      run->AddRegress(*signature, result->mutable_regression_result());
    }
    FillServedSpec(*record->servable, task.model_spec().signature_name(), result->mutable_model_spec());
  }
  return Status::Ok();
}

}  // namespace

// One gRPC Predict call: PredictApi's call (predict_api.h) with the reactor that answers it.
// Pooled: a steady load reuses the calls and, with them, their tensors.
class PredictionServiceImpl::GrpcPredictCall final : public lockstep::PredictCall {
 public:
  explicit GrpcPredictCall(PredictionServiceImpl& service) : service_(service) {}

  // Serves the call; it is answered before this returns, or later by the batch thread.
  void Start(std::unique_ptr<GrpcPredictCall> self, grpc::CallbackServerContext* context,
             grpc::ServerUnaryReactor* reactor, const tfs::PredictRequest* request,
             tfs::PredictResponse* response) {
    self_ = std::move(self);
    context_ = context;
    reactor_ = reactor;
    service_.predict_.Start({request, response, RoutingKey(*context), ClientMetadata(*context, "x-request-id"),
                             SteadyDeadline(*context)},
                            this);
  }

 private:
  // The last thing the call does: back into the pool, then the answer.
  void OnAnswered(const Status& status) override {
    grpc::ServerUnaryReactor* reactor = reactor_;
    const grpc::Status finished = FinishCall(context_, "Predict", status);
    PredictionServiceImpl& service = service_;
    service.pool_.Release(std::move(self_));
    reactor->Finish(finished);
    service.in_flight_.fetch_sub(1);
  }

  PredictionServiceImpl& service_;
  std::unique_ptr<GrpcPredictCall> self_;  // owns this call while it is in flight
  grpc::CallbackServerContext* context_ = nullptr;
  grpc::ServerUnaryReactor* reactor_ = nullptr;  // the context's default reactor (made once)
};

PredictionServiceImpl::PredictionServiceImpl(const ModelManager& manager, ServingMetrics& metrics,
                                             const ServerHealth& health, ShadowRunner& shadow,
                                             BatchScheduler* batching)
    : manager_(manager),
      metrics_(metrics),
      health_(health),
      batching_(batching),
      predict_(manager, metrics, health, shadow, batching) {
  SetMessageAllocatorFor_Predict(&predict_messages_);
}

PredictionServiceImpl::~PredictionServiceImpl() = default;

// One Classify, Regress or MultiInference call: its tasks' graphs run one after another
// (inference.h's ExamplesRun), and while one waits for a batch the call holds no thread.
class PredictionServiceImpl::ExamplesCall final : public BatchTask {
 public:
  ExamplesCall(PredictionServiceImpl& service, grpc::CallbackServerContext* context,
               grpc::ServerUnaryReactor* reactor, std::string_view method, LogBuilder log)
      : service_(service), context_(context), reactor_(reactor), method_(method), log_(std::move(log)) {}

  // Serves the call, readied by `prepare(&record, &run)`; it is answered before this returns,
  // or later by a batch thread.
  template <typename Prepare>
  static void Start(std::unique_ptr<ExamplesCall> self, std::string_view api, Prepare&& prepare) {
    ExamplesCall& call = *self;
    call.self_ = std::move(self);
    call.start_ = std::chrono::steady_clock::now();
    call.deadline_ = SteadyDeadline(*call.context_);
    call.record_.protocol = "grpc";
    call.record_.api = api;
    call.Continue(call.service_.health_.draining()
                      ? Status(StatusCode::kUnavailable, "the server is draining; retry elsewhere")
                      : Guarded([&] { return prepare(&call.record_, &call.run_); }));
  }

 private:
  // Starts the next task, or answers with `status` when it failed or every task is done.
  void Continue(Status status) {
    const GraphRunner runner{record_.servable, &record_, service_.batching_, deadline_};
    if (!run_.Continue(runner, this, &status)) Answer(status);
  }

  void OnBatchDone(Status status) override {
    RecordBatchTiming(*this, &record_);
    Continue(Guarded([&] { return run_.Finished(status); }));
  }

  // Records the call and answers it; the call ends with it.
  void Answer(const Status& status) {
    service_.metrics_.Record(record_, status.code(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    if (status.ok() && service_.logger_ != nullptr && record_.servable) {
      const LoadedVersion& served = *record_.servable;
      service_.logger_->MaybeLog(served.model(), ClientMetadata(*context_, "x-request-id"),
                                 [&](tfs::PredictionLog* log) { log_(served, log); });
    }
    grpc::ServerUnaryReactor* reactor = reactor_;
    const grpc::Status finished = FinishCall(context_, method_, status);
    PredictionServiceImpl& service = service_;
    std::unique_ptr<ExamplesCall> self = std::move(self_);
    reactor->Finish(finished);
    self.reset();
    service.in_flight_.fetch_sub(1);
  }

  PredictionServiceImpl& service_;
  grpc::CallbackServerContext* const context_;
  // The context's default reactor, made once: DefaultReactor() makes it anew each time it is called.
  grpc::ServerUnaryReactor* const reactor_;
  const std::string_view method_;
  const LogBuilder log_;
  std::unique_ptr<ExamplesCall> self_;  // owns this call while it is in flight
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point deadline_;
  RequestRecord record_;
  ExamplesRun run_;
};

template <typename Prepare>
grpc::ServerUnaryReactor* PredictionServiceImpl::StartExamples(grpc::CallbackServerContext* context,
                                                               std::string_view method, std::string_view api,
                                                               Prepare&& prepare, LogBuilder log) {
  // Counted before the drain check, so that a drain that sees none in flight knows every later
  // call will see it draining.
  in_flight_.fetch_add(1);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ExamplesCall::Start(std::make_unique<ExamplesCall>(*this, context, reactor, method, std::move(log)), api,
                      std::forward<Prepare>(prepare));
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Predict(grpc::CallbackServerContext* context,
                                                         const tfs::PredictRequest* request,
                                                         tfs::PredictResponse* response) {
  in_flight_.fetch_add(1);  // before the drain check, as in StartExamples
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::unique_ptr<GrpcPredictCall> call = pool_.Acquire(*this);
  GrpcPredictCall& started = *call;
  started.Start(std::move(call), context, reactor, request, response);
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Classify(grpc::CallbackServerContext* context,
                                                          const tfs::ClassificationRequest* request,
                                                          tfs::ClassificationResponse* response) {
  return StartExamples(
      context, "Classify", "classify",
      [=, this](RequestRecord* record, ExamplesRun* run) {
        return PrepareExamples(manager_, *context, request->model_spec(), request->input(),
                               response->mutable_result(), response->mutable_model_spec(), record, run);
      },
      [=](const LoadedVersion& served, tfs::PredictionLog* log) {
        ClassifyLogFromMessages(served, *request, *response, log);
      });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Regress(grpc::CallbackServerContext* context,
                                                         const tfs::RegressionRequest* request,
                                                         tfs::RegressionResponse* response) {
  return StartExamples(
      context, "Regress", "regress",
      [=, this](RequestRecord* record, ExamplesRun* run) {
        return PrepareExamples(manager_, *context, request->model_spec(), request->input(),
                               response->mutable_result(), response->mutable_model_spec(), record, run);
      },
      [=](const LoadedVersion& served, tfs::PredictionLog* log) {
        RegressLogFromMessages(served, *request, *response, log);
      });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::MultiInference(grpc::CallbackServerContext* context,
                                                                const tfs::MultiInferenceRequest* request,
                                                                tfs::MultiInferenceResponse* response) {
  return StartExamples(
      context, "MultiInference", "multi_inference",
      [=, this](RequestRecord* record, ExamplesRun* run) {
        return PrepareMultiInference(manager_, *context, *request, response, record, run);
      },
      [=](const LoadedVersion& served, tfs::PredictionLog* log) {
        MultiInferenceLogFromMessages(served, *request, *response, log);
      });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::GetModelMetadata(grpc::CallbackServerContext* context,
                                                                  const tfs::GetModelMetadataRequest* request,
                                                                  tfs::GetModelMetadataResponse* response) {
  StatusOr<tfs::GetModelMetadataResponse> metadata = lockstep::GetModelMetadata(manager_, *request);
  if (metadata.ok()) *response = std::move(metadata).value();
  return FinishNow(context, "GetModelMetadata", metadata.status());
}

grpc::ServerUnaryReactor* ModelServiceImpl::GetModelStatus(grpc::CallbackServerContext* context,
                                                           const tfs::GetModelStatusRequest* request,
                                                           tfs::GetModelStatusResponse* response) {
  StatusOr<tfs::GetModelStatusResponse> status = lockstep::GetModelStatus(manager_, *request);
  if (status.ok()) *response = std::move(status).value();
  return FinishNow(context, "GetModelStatus", status.status());
}

grpc::ServerUnaryReactor* ModelServiceImpl::HandleReloadConfigRequest(grpc::CallbackServerContext* context,
                                                                      const tfs::ReloadConfigRequest* request,
                                                                      tfs::ReloadConfigResponse* response) {
  const std::string_view authorization = ClientMetadata(*context, "authorization");
  if (Status allowed = admin_.Check("HandleReloadConfigRequest", context->peer(), authorization); !allowed.ok()) {
    spdlog::warn("event=admin_refused method=HandleReloadConfigRequest peer={} error=\"{}\"", context->peer(),
                 allowed.message());
    return FinishNow(context, "HandleReloadConfigRequest", allowed);
  }
  const Status status = reload_(request->config());
  StatusToProto(status, response->mutable_status());
  if (!status.ok()) {
    // An operator's action: worth a warning whatever its code.
    spdlog::warn("event=reload_config_refused error=\"{}\"", status.message());
  }
  return FinishNow(context, "HandleReloadConfigRequest", status);
}

}  // namespace lockstep
