#include "server/grpc_services.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

#include "server/inference.h"
#include "server/model_info.h"
#include "server/request_id.h"
#include "server/status_mapping.h"
#include "runtime/saved_model/tensor_proto.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

namespace {

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
grpc::Status Finish(grpc::ServerContextBase* context, std::string_view method, const Status& status) {
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

// The inputs `request` gives `signature`, in the signature's order, into `inputs`.
// Finishes a call on its default reactor now, as Finish words it; the handler returns the reactor.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, std::string_view method,
                                    const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(Finish(context, method, status));
  return reactor;
}

Status DecodePredictInputs(const tfs::PredictRequest& request, const Signature& signature,
                           std::vector<NamedTensor>* inputs) {
  // One byte budget for all of a request's tensors, so that several inputs (or splats, whose
  // few wire bytes can stand for many elements) cannot add up past the cap.
  int64_t budget = kMaxRequestTensorBytes;
  inputs->clear();
  for (const TensorBinding& binding : signature.inputs) {
    const auto it = request.inputs().find(binding.key);
    if (it == request.inputs().end()) {
      return InvalidArgument("input '" + binding.key + "' of signature '" + signature.name + "' is missing");
    }
    StatusOr<Tensor> tensor = TensorFromProto(it->second, budget);
    if (!tensor.ok()) return tensor.status().WithPrefix("input '" + binding.key + "'");
    budget -= static_cast<int64_t>(tensor->byte_size());
    inputs->push_back({binding.key, std::move(tensor).value()});
  }
  if (inputs->size() != static_cast<size_t>(request.inputs_size())) {
    for (const auto& [key, value] : request.inputs()) {
      bool known = false;
      for (const TensorBinding& b : signature.inputs) known = known || b.key == key;
      if (!known) return InvalidArgument("input '" + key + "' is not an input of signature '" + signature.name + "'");
    }
  }
  return Status::Ok();
}

template <typename Result>
Status DoExamples(const ModelManager& manager, const grpc::ServerContextBase& context, const tfs::ModelSpec& model_spec,
                  const tfs::Input& input, Result* result, tfs::ModelSpec* served_spec, RequestRecord* record,
                  BatchScheduler* batching) {
  LS_ASSIGN_OR_RETURN(ServableRequest spec, ServableRequestFromSpec(model_spec));
  spec.routing_key = RoutingKey(context);
  LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, spec));
  record->servable = servable;
  const Session& session = servable->session();
  LS_ASSIGN_OR_RETURN(const Signature* signature, FindServingSignature(session, spec.signature_name));
  record->signature = signature->name;
  LS_RETURN_IF_ERROR(CheckStillWanted(context));
  const GraphRunner runner{servable, record, batching, SteadyDeadline(context)};
  if constexpr (std::is_same_v<Result, tfs::ClassificationResult>) {
    LS_RETURN_IF_ERROR(RunClassify(runner, *signature, input, result));
  } else {
    LS_RETURN_IF_ERROR(RunRegress(runner, *signature, input, result));
  }
  FillServedSpec(*servable, spec.signature_name, served_spec);
  return Status::Ok();
}

// MultiInference as TF Serving defines it: classify and regress tasks over one input, all on
// one model (and version), each on its own signature.
Status DoMultiInference(const ModelManager& manager, const grpc::ServerContextBase& context,
                        const tfs::MultiInferenceRequest& request, tfs::MultiInferenceResponse* response,
                        RequestRecord* record, BatchScheduler* batching) {
  if (request.tasks_size() == 0) return InvalidArgument("Expected at least one task");
  std::set<std::string> signatures;
  for (const tfs::InferenceTask& task : request.tasks()) {
    if (task.model_spec().name() != request.tasks(0).model_spec().name()) {
      return InvalidArgument("All ModelSpecs in a MultiInferenceRequest must access the same model name.");
    }
    const std::string& name = task.model_spec().signature_name();
    if (!signatures.insert(name.empty() ? std::string(kDefaultSignature) : name).second) {
      return InvalidArgument("Duplicate evaluation of signature: " + name);
    }
    if (task.method_name() != kClassifyMethod && task.method_name() != kRegressMethod) {
      return Unimplemented("Unsupported signature method_name: " + task.method_name());
    }
  }
  // Resolve once, so that every task runs on the same version even if a newer one arrives.
  LS_ASSIGN_OR_RETURN(ServableRequest first, ServableRequestFromSpec(request.tasks(0).model_spec()));
  first.routing_key = RoutingKey(context);
  LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, first));
  record->servable = servable;
  const Session& session = servable->session();
  LS_RETURN_IF_ERROR(CheckStillWanted(context));
  const GraphRunner runner{servable, record, batching, SteadyDeadline(context)};
  for (const tfs::InferenceTask& task : request.tasks()) {
    LS_ASSIGN_OR_RETURN(const Signature* signature, FindServingSignature(session, task.model_spec().signature_name()));
    tfs::InferenceResult* result = response->add_results();
    if (task.method_name() == kClassifyMethod) {
      LS_RETURN_IF_ERROR(RunClassify(runner, *signature, request.input(), result->mutable_classification_result()));
    } else {
      LS_RETURN_IF_ERROR(RunRegress(runner, *signature, request.input(), result->mutable_regression_result()));
    }
    FillServedSpec(*servable, task.model_spec().signature_name(), result->mutable_model_spec());
  }
  return Status::Ok();
}

}  // namespace

// One Predict call, from its decoding to its answer. It is the call's batch task, so a call
// that waits for a batch needs nothing else, and it is pooled: a steady load reuses the calls
// and the capacity of their vectors.
class PredictionServiceImpl::PredictCall final : public BatchTask {
 public:
  explicit PredictCall(PredictionServiceImpl& service) : service_(service) {}

  // Serves the call; it is answered before this returns, or later by the batch thread.
  void Start(std::unique_ptr<PredictCall> self, grpc::CallbackServerContext* context,
             grpc::ServerUnaryReactor* reactor, const tfs::PredictRequest* request,
             tfs::PredictResponse* response) {
    self_ = std::move(self);
    context_ = context;
    reactor_ = reactor;
    request_ = request;
    response_ = response;
    start_ = std::chrono::steady_clock::now();
    record_ = RequestRecord{};
    record_.protocol = "grpc";
    record_.api = "predict";
    const Status started = service_.health_.draining()
                               ? Status(StatusCode::kUnavailable, "the server is draining; retry elsewhere")
                               : Guarded([&] { return StartRun(); });
    if (!started.ok()) Answer(started);
  }

 private:
  // Decodes and starts the run; an error is the call's answer. Once the run has started, the
  // call is its batch task's: it may be answered (and reused) before this returns.
  Status StartRun() {
    LS_ASSIGN_OR_RETURN(ServableRequest spec, ServableRequestFromSpec(request_->model_spec()));
    spec.routing_key = RoutingKey(*context_);
    LS_ASSIGN_OR_RETURN(record_.servable, ResolveServable(service_.manager_, spec));
    const Session& session = record_.servable->session();
    LS_ASSIGN_OR_RETURN(signature_, FindServingSignature(session, spec.signature_name));
    record_.signature = signature_->name;
    LS_RETURN_IF_ERROR(DecodePredictInputs(*request_, *signature_, &inputs_));
    LS_RETURN_IF_ERROR(CheckStillWanted(*context_));
    filter_.assign(request_->output_filter().begin(), request_->output_filter().end());
    LS_RETURN_IF_ERROR(CheckOutputFilter(*signature_, filter_));
    const GraphRunner runner{record_.servable, &record_, service_.batching_, SteadyDeadline(*context_)};
    runner.Start(*signature_, inputs_, &outputs_, this);
    return Status::Ok();
  }

  void OnBatchDone(Status status) override {
    record_.queue_seconds += timing().queue_seconds;
    record_.compute_seconds += timing().compute_seconds;
    if (status.ok()) status = Guarded([&] { return WriteResponse(); });
    Answer(status);
  }

  Status WriteResponse() {
    ApplyOutputFilter(filter_, &outputs_);
    service_.shadow_.MaybeShadow(service_.manager_, *record_.servable, *signature_, inputs_, outputs_);
    auto& out = *response_->mutable_outputs();
    for (const NamedTensor& output : outputs_) LS_RETURN_IF_ERROR(TensorToProto(output.tensor, &out[output.name]));
    FillServedSpec(*record_.servable, request_->model_spec().signature_name(), response_->mutable_model_spec());
    return Status::Ok();
  }

  // Records the call, answers it and goes back to the pool: the last thing the call does.
  void Answer(const Status& status) {
    service_.metrics_.Record(record_, status.code(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    grpc::ServerUnaryReactor* reactor = reactor_;
    const grpc::Status finished = Finish(context_, "Predict", status);
    PredictionServiceImpl& service = service_;
    // Let go of the tensors and the version before the call can be reused.
    inputs_.clear();
    outputs_.clear();
    record_ = RequestRecord{};
    signature_ = nullptr;
    service.ReleaseCall(std::move(self_));
    reactor->Finish(finished);
    service.in_flight_.fetch_sub(1);
  }

  PredictionServiceImpl& service_;
  std::unique_ptr<PredictCall> self_;  // owns this call while it is in flight
  grpc::CallbackServerContext* context_ = nullptr;
  grpc::ServerUnaryReactor* reactor_ = nullptr;  // the context's default reactor (made once)
  const tfs::PredictRequest* request_ = nullptr;
  tfs::PredictResponse* response_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  RequestRecord record_;
  const Signature* signature_ = nullptr;
  std::vector<NamedTensor> inputs_;
  std::vector<NamedTensor> outputs_;
  std::vector<std::string> filter_;
};

PredictionServiceImpl::PredictionServiceImpl(const ModelManager& manager, ServingMetrics& metrics,
                                             const ServerHealth& health, ShadowRunner& shadow,
                                             BatchScheduler* batching)
    : manager_(manager), metrics_(metrics), health_(health), shadow_(shadow), batching_(batching) {}

PredictionServiceImpl::~PredictionServiceImpl() = default;

std::unique_ptr<PredictionServiceImpl::PredictCall> PredictionServiceImpl::AcquireCall() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<PredictCall> call = std::move(pool_.back());
      pool_.pop_back();
      return call;
    }
  }
  return std::make_unique<PredictCall>(*this);
}

void PredictionServiceImpl::ReleaseCall(std::unique_ptr<PredictCall> call) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(std::move(call));
}

template <typename Fn>
grpc::ServerUnaryReactor* PredictionServiceImpl::RunCall(grpc::CallbackServerContext* context,
                                                         std::string_view method, std::string_view api, Fn&& serve) {
  // Counted before the drain check, so that a drain that sees none in flight knows every later
  // call will see it draining.
  in_flight_.fetch_add(1);
  const auto start = std::chrono::steady_clock::now();
  RequestRecord record;
  record.protocol = "grpc";
  record.api = api;
  const Status status =
      health_.draining() ? Status(StatusCode::kUnavailable, "the server is draining; retry elsewhere") : serve(&record);
  metrics_.Record(record, status.code(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  grpc::ServerUnaryReactor* reactor = FinishNow(context, method, status);
  in_flight_.fetch_sub(1);
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Predict(grpc::CallbackServerContext* context,
                                                         const tfs::PredictRequest* request,
                                                         tfs::PredictResponse* response) {
  in_flight_.fetch_add(1);  // before the drain check, as in RunCall
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::unique_ptr<PredictCall> call = AcquireCall();
  PredictCall& started = *call;
  started.Start(std::move(call), context, reactor, request, response);
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Classify(grpc::CallbackServerContext* context,
                                                          const tfs::ClassificationRequest* request,
                                                          tfs::ClassificationResponse* response) {
  return RunCall(context, "Classify", "classify", [&](RequestRecord* record) {
    return DoExamples(manager_, *context, request->model_spec(), request->input(), response->mutable_result(),
                      response->mutable_model_spec(), record, batching_);
  });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Regress(grpc::CallbackServerContext* context,
                                                         const tfs::RegressionRequest* request,
                                                         tfs::RegressionResponse* response) {
  return RunCall(context, "Regress", "regress", [&](RequestRecord* record) {
    return DoExamples(manager_, *context, request->model_spec(), request->input(), response->mutable_result(),
                      response->mutable_model_spec(), record, batching_);
  });
}

grpc::ServerUnaryReactor* PredictionServiceImpl::MultiInference(grpc::CallbackServerContext* context,
                                                                const tfs::MultiInferenceRequest* request,
                                                                tfs::MultiInferenceResponse* response) {
  return RunCall(context, "MultiInference", "multi_inference", [&](RequestRecord* record) {
    return DoMultiInference(manager_, *context, *request, response, record, batching_);
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
