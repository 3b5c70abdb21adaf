#include "server/health.h"

#include <string>

namespace lockstep {

Status ServerHealth::Ready() const {
  if (draining_.load()) return Status(StatusCode::kUnavailable, "the server is draining");
  if (!started_.load()) return Status(StatusCode::kUnavailable, "the server is starting");
  // Held: `for (... : manager_.Snapshot()->models)` would free it before the loop body runs.
  const std::shared_ptr<const ServingSnapshot> snapshot = manager_.Snapshot();
  for (const auto& [name, model] : snapshot->models) {
    // A resource-preserving swap takes its model out for a while, by design: the server
    // stays ready for the others (the model's own readiness says it is out).
    if (model.versions.empty() && !model.between_versions) {
      return Status(StatusCode::kUnavailable, "model '" + name + "' has no version available");
    }
  }
  return Status::Ok();
}

Status ServerHealth::ModelReady(std::string_view model, std::optional<int64_t> version) const {
  const std::shared_ptr<const ServingSnapshot> snapshot = manager_.Snapshot();
  const auto it = snapshot->models.find(model);
  if (it == snapshot->models.end()) return NotFound("no model '" + std::string(model) + "' in the config");
  if (version) {
    if (it->second.versions.count(*version) == 0) {
      return Status(StatusCode::kUnavailable, "version " + std::to_string(*version) + " of model '" +
                                                  std::string(model) + "' is not available");
    }
  } else if (it->second.versions.empty()) {
    return Status(StatusCode::kUnavailable, "model '" + std::string(model) + "' has no version available");
  }
  return Status::Ok();
}

}  // namespace lockstep
