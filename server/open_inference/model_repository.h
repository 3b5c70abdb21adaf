// What the Open Inference Protocol says about the server and its models, besides inference:
// server and model metadata, readiness, and Triton's model_repository and statistics
// extensions, as the protocol's gRPC messages (REST prints the same messages as JSON:
// rest_v2.h). One model store answers both: versions are the manager's, metadata is a
// signature's (serving_default unless the request names another), statistics are the metrics
// the server keeps for TF Serving's API too.
//
// The repository is the server's model config. Unloading a model takes it out of what the
// model store serves without taking it out of the config; loading it puts it back (and reads
// its base path again). A model the config does not have cannot be loaded: the config decides
// which models exist, and a config reload keeps unloaded models unloaded (server/README.md).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "model_store/manager.h"
#include "runtime/status.h"
#include "server/serving_metrics.h"

namespace lockstep::open_inference {

// The extensions /v2 and ServerMetadata list: exactly those served.
inline constexpr std::string_view kExtensions[] = {"binary_tensor_data", "model_repository", "statistics"};

// A model of the repository (the config) and whether it was unloaded.
struct RepositoryModel {
  std::string name;
  bool unloaded = false;
};

// The server's side of the model_repository extension (ModelServer's).
struct RepositoryControl {
  // Every model of the config, in name order.
  std::function<std::vector<RepositoryModel>()> models;
  // Loads or unloads `model`: NotFound for a model the config does not have. A load returns once
  // the model's first loads are done, as a config reload does.
  std::function<Status(const std::string& model, bool load)> set_loaded;
};

inference::ServerMetadataResponse ServerMetadata();

// The model's versions that are available (only `version`'s when given), its platform and the
// signature's inputs and outputs (-1 for a dimension the caller chooses). NotFound for a model or
// version that is not available, InvalidArgument for an unknown signature.
Status ModelMetadata(const ModelManager& manager, std::string_view model, std::string_view version,
                     std::string_view signature_name, inference::ModelMetadataResponse* response);

// Every model of the repository with each version the manager knows of, and its state (READY,
// LOADING, UNLOADING, UNAVAILABLE with the reason); with `ready_only`, the READY ones only.
inference::RepositoryIndexResponse RepositoryIndex(const ModelManager& manager, const RepositoryControl& repository,
                                                   bool ready_only);

// Per version of `model` (or of `version` only; every model when `model` is empty): requests
// answered and failed, with their cumulative times, queue and compute times, from `metrics`.
// NotFound for a model the manager does not serve.
Status ModelStatistics(const ModelManager& manager, const ServingMetrics& metrics, std::string_view model,
                       std::string_view version, inference::ModelStatisticsResponse* response);

}  // namespace lockstep::open_inference
