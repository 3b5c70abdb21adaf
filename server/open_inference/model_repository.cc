#include "server/open_inference/model_repository.h"

#include "runtime/model_dir.h"
#include "server/flags.h"
#include "server/inference.h"
#include "server/open_inference/datatype.h"
#include "server/open_inference/infer_api.h"

namespace lockstep::open_inference {

namespace {

// Triton's platform names for what each of our formats is.
std::string_view PlatformName(ModelFormat format) {
  switch (format) {
    case ModelFormat::kSavedModel: return "tensorflow_savedmodel";
    case ModelFormat::kOnnx: return "onnxruntime_onnx";
    case ModelFormat::kBundle: return "lockstep_bundle";
  }
  return "lockstep_bundle";
}

void AddTensorMetadata(const TensorBinding& binding,
                       google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  inference::ModelMetadataResponse::TensorMetadata* t = out->Add();
  t->set_name(binding.key);
  t->set_datatype(std::string(DatatypeName(binding.dtype)));
  for (const int64_t dim : binding.shape.dims()) t->add_shape(dim);
}

uint64_t Nanoseconds(double seconds) { return static_cast<uint64_t>(seconds * 1e9 + 0.5); }

void SetDuration(uint64_t count, double seconds, inference::StatisticDuration* d) {
  d->set_count(count);
  d->set_ns(Nanoseconds(seconds));
}

}  // namespace

inference::ServerMetadataResponse ServerMetadata() {
  inference::ServerMetadataResponse response;
  response.set_name("lockstep");
  response.set_version(std::string(ServerVersion()));
  for (const std::string_view extension : kExtensions) response.add_extensions(std::string(extension));
  return response;
}

Status ModelMetadata(const ModelManager& manager, std::string_view model, std::string_view version,
                     std::string_view signature_name, inference::ModelMetadataResponse* response) {
  ServableRequest request;
  request.model = model;
  LS_RETURN_IF_ERROR(ParseVersion(version, &request));
  LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, request));
  LS_ASSIGN_OR_RETURN(const Signature* signature, FindServingSignature(servable->session(), signature_name));
  response->set_name(std::string(model));
  if (!version.empty()) {
    response->add_versions(std::to_string(servable->version()));
  } else {
    const std::shared_ptr<const ServingSnapshot> snapshot = manager.Snapshot();
    if (const auto it = snapshot->models.find(model); it != snapshot->models.end()) {
      for (const auto& [v, unused] : it->second.versions) response->add_versions(std::to_string(v));
    }
  }
  response->set_platform(std::string(PlatformName(DetectModelFormat(servable->dir()))));
  for (const TensorBinding& b : signature->inputs) AddTensorMetadata(b, response->mutable_inputs());
  for (const TensorBinding& b : signature->outputs) AddTensorMetadata(b, response->mutable_outputs());
  return Status::Ok();
}

inference::RepositoryIndexResponse RepositoryIndex(const ModelManager& manager, const RepositoryControl& repository,
                                                   bool ready_only) {
  inference::RepositoryIndexResponse response;
  for (const RepositoryModel& model : repository.models()) {
    if (model.unloaded) {
      if (ready_only) continue;
      inference::RepositoryIndexResponse::ModelIndex* index = response.add_models();
      index->set_name(model.name);
      index->set_state("UNAVAILABLE");
      index->set_reason("unloaded");
      continue;
    }
    StatusOr<std::vector<VersionStatusInfo>> versions = manager.GetModelStatus(model.name);
    if (!versions.ok()) {  // nothing on disk yet, or the model's directory is empty
      if (ready_only) continue;
      inference::RepositoryIndexResponse::ModelIndex* index = response.add_models();
      index->set_name(model.name);
      index->set_state("UNAVAILABLE");
      index->set_reason(versions.status().message());
      continue;
    }
    for (const VersionStatusInfo& v : *versions) {
      std::string_view state = "UNAVAILABLE";
      std::string reason;
      switch (v.state) {
        case VersionState::kAvailable: state = "READY"; break;
        case VersionState::kStart:
        case VersionState::kLoading: state = "LOADING"; break;
        case VersionState::kUnloading: state = "UNLOADING"; break;
        case VersionState::kEnd:
        case VersionState::kUnknown: reason = v.status.ok() ? "unloaded" : v.status.message(); break;
      }
      if (ready_only && state != "READY") continue;
      inference::RepositoryIndexResponse::ModelIndex* index = response.add_models();
      index->set_name(model.name);
      index->set_version(std::to_string(v.version));
      index->set_state(std::string(state));
      index->set_reason(reason);
    }
  }
  return response;
}

Status ModelStatistics(const ModelManager& manager, const ServingMetrics& metrics, std::string_view model,
                       std::string_view version, inference::ModelStatisticsResponse* response) {
  std::vector<std::string> models;
  const std::shared_ptr<const ServingSnapshot> snapshot = manager.Snapshot();
  if (model.empty()) {
    for (const auto& [name, unused] : snapshot->models) models.push_back(name);
  } else {
    if (!snapshot->models.contains(model)) return NotFound("no model named '" + std::string(model) + "' is served");
    models.emplace_back(model);
  }
  ServableRequest request;
  LS_RETURN_IF_ERROR(ParseVersion(version, &request));
  if (request.label) {
    request.model = model;
    LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, request));
    request.version = servable->version();
  }
  for (const std::string& name : models) {
    for (const VersionStatistics& v : metrics.Statistics(name)) {
      if (request.version && v.version != *request.version) continue;
      inference::ModelStatistics* stats = response->add_model_stats();
      stats->set_name(name);
      stats->set_version(std::to_string(v.version));
      stats->set_inference_count(v.success_count);
      // Without batching every answered request is one execution of the graph.
      stats->set_execution_count(v.batches > 0 ? v.batches : v.success_count);
      inference::InferStatistics* infer = stats->mutable_inference_stats();
      SetDuration(v.success_count, v.success_seconds, infer->mutable_success());
      // A failure's time is not kept (the latency histograms hold answers only).
      SetDuration(v.fail_count, 0, infer->mutable_fail());
      SetDuration(v.success_count, v.queue_seconds, infer->mutable_queue());
      SetDuration(v.success_count, v.compute_seconds, infer->mutable_compute_infer());
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::open_inference
