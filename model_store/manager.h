// The manager: keeps the versions the config asks for loaded and publishes what can serve.
//
// A background thread polls every model's base path (source.h), applies its version policy
// (version_policy.h) and drives each version through TF Serving's states
//     START(10) -> LOADING(20) -> AVAILABLE(30) -> UNLOADING(40) -> END(50)
// with the availability-preserving policy: new versions are loaded and warmed up first, on
// load threads that never block requests, and a version no longer aspired is unloaded only
// once an aspired version is available (or when its model leaves the config). A model whose
// config says resource preserving (ModelConfig::Transition) goes the other way, for models
// too large for two copies: the versions no longer aspired are unloaded first, the new one is
// loaded only once they are freed (the last request holding one ended), and in between the
// model answers Unavailable and does not count against the server's readiness.
// Options::max_model_memory_bytes bounds what all the loaded versions hold together. A failed load
// ends in END with its error kept (GetModelStatus shows it, spdlog logs it once) and changes
// nothing that serves; it is tried again only when its directory changes (another inode, file
// set, size or modification time) or a config that changes that model's base path, platform
// or policy is applied (moving a label does not), never on every poll (nor on every re-read
// of an unchanged config file).
//
// Requests see an immutable ServingSnapshot. Resolve() copies one shared_ptr under a small
// mutex (the only shared state on the request path) and hands back a refcounted handle: a
// request in flight keeps its version alive and usable after the manager has unloaded it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "model_store/version_storage.h"
#include "model_store/loader.h"
#include "model_store/model_config.h"
#include "model_store/traffic_split.h"
#include "runtime/session.h"
#include "runtime/status.h"

namespace lockstep {

using ServableHandle = std::shared_ptr<const LoadedVersion>;

// Numbered as TF Serving's ModelVersionStatus.State.
enum class VersionState : int {
  kUnknown = 0,
  kStart = 10,
  kLoading = 20,
  kAvailable = 30,
  kUnloading = 40,
  kEnd = 50,
};
std::string_view VersionStateName(VersionState state);  // "AVAILABLE", ...

struct VersionStatusInfo {
  int64_t version = 0;
  VersionState state = VersionState::kUnknown;
  Status status;  // the load error for a version that failed; OK otherwise
  double load_seconds = 0;  // how long its last load (and warm-up) took; 0 before one ended
};

// How many requests were routed to an arm of a model's traffic split since it joined the config
// (whether or not they then succeeded).
struct TrafficArmCount {
  std::string model;
  std::string arm;  // TrafficArm::Name(): "label:canary", "version:2"
  uint64_t requests = 0;
};

// What serves, as one immutable value; replaced whole, never changed.
struct ServingSnapshot {
  struct Model {
    std::map<int64_t, ServableHandle> versions;  // AVAILABLE versions only
    std::map<std::string, int64_t, std::less<>> labels;
    VersionPolicy policy;
    // The traffic split, resolved against what is available: one entry per arm of the config,
    // in its order. An arm whose target is not available has weight 0 and no servable.
    std::vector<WeightedArm> arms;
    std::vector<ServableHandle> arm_servables;
    std::vector<std::shared_ptr<std::atomic<uint64_t>>> arm_counts;  // shared with the manager
    ServableHandle shadow;  // the shadow's target when configured and available
    double shadow_percent = 0;
    // Resource preserving, and no version available while one loads: Resolve answers
    // Unavailable (retry shortly) instead of NotFound.
    bool between_versions = false;
  };
  std::map<std::string, Model, std::less<>> models;
};

class ModelManager {
 public:
  struct Options {
    // Seconds between polls of the base paths. 0 (or less): poll once when a config is
    // applied, then only on PollNow().
    int64_t file_system_poll_wait_seconds = 1;
    // Lets a config give a NEW label to a version that is not yet available. Moving an
    // existing label always needs its new target available (as in TF Serving).
    bool allow_version_labels_for_unavailable_models = false;
    SessionOptions session_options;
    // Threads that load and warm up versions (at least 1); requests never wait on them.
    int num_load_threads = 2;
    // The most bytes the loaded versions of every model may hold together, each counted as
    // the size of its directory's files (its weights, mostly); a load that would pass it fails
    // with ResourceExhausted and whatever serves stays. 0: no bound.
    int64_t max_model_memory_bytes = 0;
    // False: versions load without any warm-up (TF Serving's --enable_model_warmup=false).
    bool enable_model_warmup = true;
    // Runs on the load thread once a version has loaded, before it becomes available (and so
    // before any request can reach it), as TF Serving replays a SavedModel's warm-up file; an
    // error fails the load. Its time counts in the load's. Empty: none.
    std::function<Status(const ServableHandle& version)> warm_up;
    // Where s3:// base paths are read from and downloaded to (version_storage.h).
    StorageOptions storage;
  };

  explicit ModelManager(Options options);
  ~ModelManager();  // Stop()
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Validates `config` and, if it and its labels are acceptable, replaces the current config
  // whole: models left out are unloaded, new ones are polled at once. On any error nothing
  // changes and the old config keeps serving. Label errors are FailedPrecondition, as TF
  // Serving's: "Request to assign label to version 2 of model m, which is not currently
  // available for inference"; a label on a version the new policy would unload is refused
  // too, so that no config leaves a label pointing at nothing.
  Status ApplyConfig(StoreConfig config);

  // The version to serve. No version and no label: with a traffic split, the arm PickArm
  // chooses (by `routing_key` when it is not empty, so that a key stays on one arm; at random
  // otherwise) among the arms whose target is available; without one, or when no arm's target
  // is available, the highest available version. Errors, as
  // TF Serving words them: NotFound "Servable not found for request: Latest(m)" or
  // "... Specific(m, 3)"; an unknown label is "Unrecognized servable version label: canary",
  // NotFound (TF Serving says InvalidArgument, but a label is a name like a model's or a
  // version's, and REST clients expect 404 for all three); both a version and a label is
  // InvalidArgument.
  StatusOr<ServableHandle> Resolve(std::string_view model, std::optional<int64_t> version = std::nullopt,
                                   std::optional<std::string_view> label = std::nullopt,
                                   std::string_view routing_key = {}) const;

  // The current snapshot (what Resolve reads), e.g. for metadata listings. Keep the pointer
  // while reading through it: in `for (x : manager.Snapshot()->models)` it is gone before the
  // loop body runs (C++20), and a version that loads meanwhile frees the snapshot.
  std::shared_ptr<const ServingSnapshot> Snapshot() const;

  // The versions of `model` (or just `version`) the manager has handled and whose directory
  // still exists, with failed ones kept, ascending. NotFound "Could not find any
  // versions of model m" / "Could not find version 3 of model m".
  StatusOr<std::vector<VersionStatusInfo>> GetModelStatus(std::string_view model,
                                                          std::optional<int64_t> version = std::nullopt) const;

  // The shadow traffic's target for a request of `model` that `served_version` answered: drawn
  // at the configured percentage; null when not drawn, when the model has no shadow, when its
  // target is not available, or when the target is the version that answered.
  ServableHandle ShadowFor(std::string_view model, int64_t served_version) const;

  // Every arm of every traffic split in the config, with its request count (for metrics).
  std::vector<TrafficArmCount> TrafficCounts() const;

  // Each model's count, at the last poll, of the bundle writers' temporaries left in its base
  // path by writers that died (runtime/bundle/temporaries.h), for metrics.
  std::vector<std::pair<std::string, int64_t>> StaleTemporaryCounts() const;

  // Polls every base path now, on the calling thread, and queues the loads that follow.
  void PollNow();
  // Waits until no poll is pending or running and no load is queued or running. False on
  // timeout. With PollNow(), lets tests step the manager without sleeping.
  bool WaitUntilIdle(std::chrono::milliseconds timeout);

  // Stops the threads (idempotent). Loaded versions stay in the snapshot until destruction.
  void Stop();

 private:
  struct VersionEntry;
  struct ModelEntry;
  struct Garbage;
  struct PollWork;
  struct LoadTask {
    std::string model;
    uint64_t incarnation;
    int64_t version;
    std::filesystem::path dir;
    std::string base_path;
    bool bf16_products;
    int intra_op_threads;
    // Resource preserving: the versions unloaded to make room, which must be freed first.
    std::vector<std::weak_ptr<const LoadedVersion>> released_first;
  };

  void PollLoop();
  // Removes S3 versions no longer loaded, loading or aspired from the download cache.
  void PruneCachesLocked();
  void LoadLoop();
  // Resource preserving: waits until the versions `task` unloaded to make room are freed.
  void WaitUntilReleased(const LoadTask& task) const;
  // With a memory budget: counts `task`'s bytes against it, or refuses (ResourceExhausted).
  Status ReserveMemory(const LoadTask& task);
  void PollOnce();
  // Everything below runs with mu_ held. What they release goes to `garbage`, destroyed by
  // the caller once mu_ is released.
  // Recomputes the aspired versions from entry.on_disk, queues the loads they need (a failed
  // version is queued again only if its fingerprint changed or the config is newer), then
  // transitions (resource preserving: transitions first, and the loads wait for what that
  // released).
  void ReconcileLocked(ModelEntry& entry, const std::map<int64_t, std::string>& fingerprints,
                       Garbage* garbage);
  // Unloads the versions no longer aspired, as far as availability allows (resource
  // preserving: all of them), adding each to `released` when given.
  void TransitionLocked(ModelEntry& entry, Garbage* garbage,
                        std::vector<std::weak_ptr<const LoadedVersion>>* released = nullptr);
  // Takes a poll's listings in: reconciles every model still configured, then publishes.
  void ApplyListingsLocked(std::vector<PollWork>& work, Garbage* garbage);
  void PublishLocked(Garbage* garbage);
  bool IdleLocked() const;

  const Options options_;

  // Serialises polls (the background one and PollNow) so two never race on the same model.
  std::mutex poll_mu_;

  mutable std::mutex mu_;  // guards everything below except snapshot_
  std::condition_variable poll_cv_;
  std::condition_variable load_cv_;
  std::condition_variable idle_cv_;
  std::map<std::string, std::unique_ptr<ModelEntry>, std::less<>> models_;
  uint64_t next_incarnation_ = 1;
  bool poll_requested_ = false;
  int polls_running_ = 0;
  std::deque<LoadTask> load_queue_;
  int loads_running_ = 0;
  bool stopping_ = false;

  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const ServingSnapshot> snapshot_;

  std::once_flag stop_once_;
  std::thread poll_thread_;
  std::vector<std::thread> load_threads_;
};

}  // namespace lockstep
