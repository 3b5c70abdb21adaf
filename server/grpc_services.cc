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
// whose deadline has passed is not run. (ServerContext::IsCancelled is not asked: on the
// synchronous server it polls the call's completion queue, which cost 25 us a request.)
Status CheckStillWanted(const grpc::ServerContext& context) {
  if (context.deadline() < std::chrono::system_clock::now()) {
    return Status(StatusCode::kDeadlineExceeded, "the request's deadline passed before it could run");
  }
  return Status::Ok();
}

// The call's deadline on the steady clock, which the batch queues use (gRPC's is on the system
// clock); none (max) when the client set none.
std::chrono::steady_clock::time_point SteadyDeadline(const grpc::ServerContext& context) {
  const auto left = context.deadline() - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

// The value of the client's metadata `key` (a view into the call's metadata), or empty.
std::string_view ClientMetadata(const grpc::ServerContext& context, const char* key) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(key);
  return it == metadata.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
}

// The key that keeps a client on one arm of a traffic split.
std::string_view RoutingKey(const grpc::ServerContext& context) { return ClientMetadata(context, "x-routing-key"); }

// A failed call gets a request id (the client's x-request-id metadata, else a new one) in its
// trailing metadata and in the log line about it; 5xx-like failures are warnings.
grpc::Status Finish(grpc::ServerContext* context, std::string_view method, const Status& status) {
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

Status DoPredict(const ModelManager& manager, const grpc::ServerContext& context, const tfs::PredictRequest& request,
                 tfs::PredictResponse* response, RequestRecord* record, ShadowRunner& shadow,
                 BatchScheduler* batching) {
  LS_ASSIGN_OR_RETURN(ServableRequest spec, ServableRequestFromSpec(request.model_spec()));
  spec.routing_key = RoutingKey(context);
  LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, spec));
  record->servable = servable;
  const Session& session = servable->session();
  LS_ASSIGN_OR_RETURN(const Signature* signature, FindServingSignature(session, spec.signature_name));
  record->signature = signature->name;

  // One byte budget for all of a request's tensors, so that several inputs (or splats, whose
  // few wire bytes can stand for many elements) cannot add up past the cap.
  int64_t budget = kMaxRequestTensorBytes;
  std::vector<NamedTensor> inputs;
  inputs.reserve(request.inputs_size());
  for (const TensorBinding& binding : signature->inputs) {
    const auto it = request.inputs().find(binding.key);
    if (it == request.inputs().end()) {
      return InvalidArgument("input '" + binding.key + "' of signature '" + signature->name + "' is missing");
    }
    StatusOr<Tensor> tensor = TensorFromProto(it->second, budget);
    if (!tensor.ok()) return tensor.status().WithPrefix("input '" + binding.key + "'");
    budget -= static_cast<int64_t>(tensor->byte_size());
    inputs.push_back({binding.key, std::move(tensor).value()});
  }
  if (inputs.size() != static_cast<size_t>(request.inputs_size())) {
    for (const auto& [key, value] : request.inputs()) {
      bool known = false;
      for (const TensorBinding& b : signature->inputs) known = known || b.key == key;
      if (!known) return InvalidArgument("input '" + key + "' is not an input of signature '" + signature->name + "'");
    }
  }
  LS_RETURN_IF_ERROR(CheckStillWanted(context));
  const std::vector<std::string> filter(request.output_filter().begin(), request.output_filter().end());
  std::vector<NamedTensor> outputs;
  const GraphRunner runner{servable, record, batching, SteadyDeadline(context)};
  LS_RETURN_IF_ERROR(RunPredict(runner, *signature, inputs, filter, &outputs));
  shadow.MaybeShadow(manager, *servable, *signature, inputs, outputs);
  auto& out = *response->mutable_outputs();
  for (const NamedTensor& output : outputs) LS_RETURN_IF_ERROR(TensorToProto(output.tensor, &out[output.name]));
  FillServedSpec(*servable, spec.signature_name, response->mutable_model_spec());
  return Status::Ok();
}

template <typename Result>
Status DoExamples(const ModelManager& manager, const grpc::ServerContext& context, const tfs::ModelSpec& model_spec,
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
Status DoMultiInference(const ModelManager& manager, const grpc::ServerContext& context,
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

template <typename Fn>
grpc::Status PredictionServiceImpl::RunCall(grpc::ServerContext* context, std::string_view method,
                                            std::string_view api, Fn&& serve) {
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
  grpc::Status finished = Finish(context, method, status);
  in_flight_.fetch_sub(1);
  return finished;
}

grpc::Status PredictionServiceImpl::Predict(grpc::ServerContext* context, const tfs::PredictRequest* request,
                                            tfs::PredictResponse* response) {
  return RunCall(context, "Predict", "predict",
                [&](RequestRecord* record) { return DoPredict(manager_, *context, *request, response, record, shadow_, batching_); });
}

grpc::Status PredictionServiceImpl::Classify(grpc::ServerContext* context, const tfs::ClassificationRequest* request,
                                             tfs::ClassificationResponse* response) {
  return RunCall(context, "Classify", "classify", [&](RequestRecord* record) {
    return DoExamples(manager_, *context, request->model_spec(), request->input(), response->mutable_result(),
                      response->mutable_model_spec(), record, batching_);
  });
}

grpc::Status PredictionServiceImpl::Regress(grpc::ServerContext* context, const tfs::RegressionRequest* request,
                                            tfs::RegressionResponse* response) {
  return RunCall(context, "Regress", "regress", [&](RequestRecord* record) {
    return DoExamples(manager_, *context, request->model_spec(), request->input(), response->mutable_result(),
                      response->mutable_model_spec(), record, batching_);
  });
}

grpc::Status PredictionServiceImpl::MultiInference(grpc::ServerContext* context,
                                                   const tfs::MultiInferenceRequest* request,
                                                   tfs::MultiInferenceResponse* response) {
  return RunCall(context, "MultiInference", "multi_inference", [&](RequestRecord* record) {
    return DoMultiInference(manager_, *context, *request, response, record, batching_);
  });
}

grpc::Status PredictionServiceImpl::GetModelMetadata(grpc::ServerContext* context, const tfs::GetModelMetadataRequest* request,
                                                     tfs::GetModelMetadataResponse* response) {
  StatusOr<tfs::GetModelMetadataResponse> metadata = lockstep::GetModelMetadata(manager_, *request);
  if (metadata.ok()) *response = std::move(metadata).value();
  return Finish(context, "GetModelMetadata", metadata.status());
}

grpc::Status ModelServiceImpl::GetModelStatus(grpc::ServerContext* context, const tfs::GetModelStatusRequest* request,
                                              tfs::GetModelStatusResponse* response) {
  StatusOr<tfs::GetModelStatusResponse> status = lockstep::GetModelStatus(manager_, *request);
  if (status.ok()) *response = std::move(status).value();
  return Finish(context, "GetModelStatus", status.status());
}

grpc::Status ModelServiceImpl::HandleReloadConfigRequest(grpc::ServerContext* context,
                                                         const tfs::ReloadConfigRequest* request,
                                                         tfs::ReloadConfigResponse* response) {
  const std::string_view authorization = ClientMetadata(*context, "authorization");
  if (Status allowed = admin_.Check("HandleReloadConfigRequest", context->peer(), authorization); !allowed.ok()) {
    spdlog::warn("event=admin_refused method=HandleReloadConfigRequest peer={} error=\"{}\"", context->peer(),
                 allowed.message());
    return Finish(context, "HandleReloadConfigRequest", allowed);
  }
  const Status status = reload_(request->config());
  StatusToProto(status, response->mutable_status());
  if (!status.ok()) {
    // An operator's action: worth a warning whatever its code.
    spdlog::warn("event=reload_config_refused error=\"{}\"", status.message());
  }
  return Finish(context, "HandleReloadConfigRequest", status);
}

}  // namespace lockstep
