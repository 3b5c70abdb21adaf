// The Open Inference Protocol's REST paths, and the JSON its answers other than infer's take
// (the same messages gRPC answers with, printed as the protocol's REST API shows them: versions
// and shape dimensions as the protocol types them, not as proto3's JSON would).
//
//   GET  /v2                                                  server metadata
//   GET  /v2/health/live, /v2/health/ready                    (server/health.h)
//   GET  /v2/models/{m}[/versions/{v}]                        model metadata (?signature_name=)
//   GET  /v2/models/{m}[/versions/{v}]/ready                  (server/health.h)
//   POST /v2/models/{m}[/versions/{v}]/infer                  inference (rest_infer.h)
//   GET  /v2/models[/{m}[/versions/{v}]]/stats                statistics extension
//   POST /v2/repository/index                                 model_repository extension
//   POST /v2/repository/models/{m}/load, .../unload
#pragma once

#include <string>
#include <string_view>

#include "inference/grpc_service.pb.h"
#include "runtime/status.h"

namespace lockstep::open_inference {

struct RestPath {
  enum class Kind { kServer, kHealth, kModelReady, kMetadata, kInfer, kStatistics, kIndex, kLoad, kUnload };
  Kind kind = Kind::kServer;
  std::string model;    // URL-decoded; empty for the server's paths and all-model statistics
  std::string version;  // as given; empty: none
  std::string signature_name;  // metadata's ?signature_name=
};

// Whether `target` is one of the protocol's (it starts with /v2, case-sensitively, as the
// protocol's paths are).
bool IsV2Target(std::string_view target);
// Parses a /v2 target for `method` into `out` (reusing its strings). NotFound for a path the
// protocol does not have, InvalidArgument for a malformed one (a bad escape, an empty model
// name), and MethodNotAllowed-like InvalidArgument for the wrong method.
Status ParseRestPath(std::string_view method, std::string_view target, RestPath* out);

std::string ServerMetadataJson(const inference::ServerMetadataResponse& response);
std::string ModelMetadataJson(const inference::ModelMetadataResponse& response);
std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& response);
std::string ModelStatisticsJson(const inference::ModelStatisticsResponse& response);
// A repository index request's body: {} or {"ready": bool}; empty means {}.
StatusOr<bool> ParseRepositoryIndexBody(std::string_view body);

}  // namespace lockstep::open_inference
