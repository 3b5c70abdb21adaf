// Liveness and readiness, as Kubernetes probes, Triton and KServe's v2 health API see them:
//   live   the process answers (until it exits, drain included);
//   ready  the server has started (its first loads done), is not draining, and every model of
//          its config has a version available;
//   a model (or one version) is ready when it (or that version) is available.
// The REST API serves these at /v2/health/{live,ready} and /v2/models/{m}[/versions/{v}]/ready;
// gRPC's standard health service follows started and draining.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

#include "model_store/manager.h"
#include "runtime/status.h"

namespace lockstep {

class ServerHealth {
 public:
  explicit ServerHealth(const ModelManager& manager) : manager_(manager) {}

  void SetStarted() { started_.store(true); }
  void SetDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }

  // OK when ready; Unavailable saying why not.
  Status Ready() const;
  // OK when ready; NotFound for a model the config does not have; Unavailable when it (or the
  // version) has nothing available.
  Status ModelReady(std::string_view model, std::optional<int64_t> version) const;

 private:
  const ModelManager& manager_;
  std::atomic<bool> started_{false};
  std::atomic<bool> draining_{false};
};

}  // namespace lockstep
