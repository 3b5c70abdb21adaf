#include "server/model_info.h"

#include <google/protobuf/util/json_util.h>

#include "server/inference.h"
#include "runtime/saved_model/saved_model.h"
#include "runtime/saved_model/tensor_proto.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

namespace {

constexpr std::string_view kSignatureDefField = "signature_def";

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  // Only fails for an Any of an unknown type, which these messages never hold.
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

// The version a spec names: its version, its label's version, or none (all versions).
StatusOr<std::optional<int64_t>> SpecVersion(const ModelManager& manager, const tfs::ModelSpec& spec) {
  LS_ASSIGN_OR_RETURN(const ServableRequest request, ServableRequestFromSpec(spec));
  if (!request.label) return request.version;
  LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, request));
  return std::optional<int64_t>(servable->version());
}

}  // namespace

void StatusToProto(const Status& status, tfs::StatusProto* proto) {
  proto->set_error_code(static_cast<tensorflow::error::Code>(status.code()));
  proto->set_error_message(status.message());
}

StatusOr<tfs::GetModelStatusResponse> GetModelStatus(const ModelManager& manager,
                                                     const tfs::GetModelStatusRequest& request) {
  LS_ASSIGN_OR_RETURN(const std::optional<int64_t> version, SpecVersion(manager, request.model_spec()));
  LS_ASSIGN_OR_RETURN(const std::vector<VersionStatusInfo> versions,
                      manager.GetModelStatus(request.model_spec().name(), version));
  tfs::GetModelStatusResponse response;
  for (const VersionStatusInfo& info : versions) {
    tfs::ModelVersionStatus* status = response.add_model_version_status();
    status->set_version(info.version);
    status->set_state(static_cast<tfs::ModelVersionStatus::State>(info.state));
    StatusToProto(info.status, status->mutable_status());
  }
  return response;
}

StatusOr<tfs::GetModelMetadataResponse> GetModelMetadata(const ModelManager& manager,
                                                         const tfs::GetModelMetadataRequest& request) {
  if (request.metadata_field_size() == 0) {
    return InvalidArgument("GetModelMetadataRequest must specify at least one metadata_field");
  }
  for (const std::string& field : request.metadata_field()) {
    if (field != kSignatureDefField) return InvalidArgument("Metadata field " + field + " is not supported");
  }
  LS_ASSIGN_OR_RETURN(const ServableRequest spec, ServableRequestFromSpec(request.model_spec()));
  LS_ASSIGN_OR_RETURN(const ServableHandle servable, ResolveServable(manager, spec));
  tfs::GetModelMetadataResponse response;
  tfs::ModelSpec* served = response.mutable_model_spec();
  served->set_name(servable->model());
  served->mutable_version()->set_value(servable->version());
  served->set_signature_name(request.model_spec().signature_name());
  (*response.mutable_metadata())[std::string(kSignatureDefField)].PackFrom(
      SignatureDefMapFromGraph(servable->session().model().graph));
  return response;
}

std::string ModelStatusJson(const tfs::GetModelStatusResponse& response) { return ToJson(response); }

StatusOr<std::string> ModelMetadataJson(const tfs::GetModelMetadataResponse& response) {
  std::string out = "{\n\"model_spec\": " + ToJson(response.model_spec()) + ",\n\"metadata\": {";
  bool first = true;
  for (const auto& [field, any] : response.metadata()) {
    tfs::SignatureDefMap signatures;
    if (field != kSignatureDefField || !any.UnpackTo(&signatures)) {
      return Internal("metadata field " + field + " does not hold a SignatureDefMap");
    }
    out += (first ? "\"" : ",\n\"") + field + "\": " + ToJson(signatures);
    first = false;
  }
  out += "}\n}\n";
  return out;
}

tensorflow::serving::SignatureDefMap SignatureDefMapFromGraph(const Graph& graph) {
  tensorflow::serving::SignatureDefMap map;
  if (StatusOr<tensorflow::MetaGraphDef> imported = ImportedSignatureDefs(graph); imported.ok()) {
    *map.mutable_signature_def() = imported->signature_def();
    return map;
  }
  for (const Signature& s : graph.signatures) {
    (*map.mutable_signature_def())[s.name] = SignatureDefFromSignature(s);
  }
  return map;
}


}  // namespace lockstep
