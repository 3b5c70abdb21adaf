#include "model_store/manager.h"

#include "model_store/manager_state.h"

#include "runtime/bundle/temporaries.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <system_error>
#include <utility>

#include "model_store/source.h"
#include "model_store/version_policy.h"

namespace lockstep {

std::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kUnknown: return "UNKNOWN";
    case VersionState::kStart: return "START";
    case VersionState::kLoading: return "LOADING";
    case VersionState::kAvailable: return "AVAILABLE";
    case VersionState::kUnloading: return "UNLOADING";
    case VersionState::kEnd: return "END";
  }
  return "UNKNOWN";
}

namespace {

std::string RequestString(std::string_view model, std::optional<int64_t> version) {
  if (version) return "Specific(" + std::string(model) + ", " + std::to_string(*version) + ")";
  return "Latest(" + std::string(model) + ")";
}

}  // namespace

ModelManager::ModelManager(Options options)
    : options_(std::move(options)), snapshot_(std::make_shared<const ServingSnapshot>()) {
  poll_thread_ = std::thread([this] { PollLoop(); });
  const int n = std::max(1, options_.num_load_threads);
  for (int i = 0; i < n; ++i) load_threads_.emplace_back([this] { LoadLoop(); });
}

ModelManager::~ModelManager() { Stop(); }

void ModelManager::Stop() {
  std::call_once(stop_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    poll_cv_.notify_all();
    load_cv_.notify_all();
    if (poll_thread_.joinable()) poll_thread_.join();
    for (std::thread& t : load_threads_) {
      if (t.joinable()) t.join();
    }
    std::lock_guard<std::mutex> lock(mu_);
    load_queue_.clear();
    idle_cv_.notify_all();
  });
}

std::shared_ptr<const ServingSnapshot> ModelManager::Snapshot() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

StatusOr<ServableHandle> ModelManager::Resolve(std::string_view model, std::optional<int64_t> version,
                                               std::optional<std::string_view> label,
                                               std::string_view routing_key) const {
  if (version && label) {
    return InvalidArgument("Both model version (" + std::to_string(*version) + ") and model version label (" +
                           std::string(*label) + ") cannot be supplied.");
  }
  const std::shared_ptr<const ServingSnapshot> snapshot = Snapshot();
  const auto model_it = snapshot->models.find(model);
  if (label) {
    if (model_it == snapshot->models.end()) {
      return NotFound("Unrecognized servable version label: " + std::string(*label));
    }
    const auto label_it = model_it->second.labels.find(*label);
    if (label_it == model_it->second.labels.end()) {
      return NotFound("Unrecognized servable version label: " + std::string(*label));
    }
    version = label_it->second;
  }
  if (model_it == snapshot->models.end()) {
    return NotFound("Servable not found for request: " + RequestString(model, version));
  }
  const auto& versions = model_it->second.versions;
  if (version) {
    const auto it = versions.find(*version);
    if (it == versions.end()) return NotFound("Servable not found for request: " + RequestString(model, version));
    return it->second;
  }
  if (const auto& arms = model_it->second.arms; !arms.empty()) {
    const size_t arm =
        PickArm(arms, routing_key.empty() ? std::nullopt : std::optional<uint64_t>(RoutingHash(routing_key)));
    if (arm < arms.size()) {
      model_it->second.arm_counts[arm]->fetch_add(1, std::memory_order_relaxed);
      return model_it->second.arm_servables[arm];
    }
  }
  if (versions.empty() && model_it->second.between_versions) {
    return Status(StatusCode::kUnavailable, "model " + std::string(model) +
                                                " is between versions (version_transition resource_preserving): "
                                                "retry shortly");
  }
  if (versions.empty()) return NotFound("Servable not found for request: " + RequestString(model, version));
  return versions.rbegin()->second;
}

ServableHandle ModelManager::ShadowFor(std::string_view model, int64_t served_version) const {
  const std::shared_ptr<const ServingSnapshot> snapshot = Snapshot();
  const auto it = snapshot->models.find(model);
  if (it == snapshot->models.end() || it->second.shadow == nullptr) return nullptr;
  if (it->second.shadow->version() == served_version) return nullptr;
  thread_local std::mt19937_64 generator{std::random_device{}()};
  const double draw = static_cast<double>(generator() >> 11) * 0x1.0p-53 * 100.0;
  return draw < it->second.shadow_percent ? it->second.shadow : nullptr;
}

std::vector<TrafficArmCount> ModelManager::TrafficCounts() const {
  std::vector<TrafficArmCount> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, entry] : models_) {
    for (const TrafficArm& arm : entry->config.traffic) {
      const auto it = entry->arm_counts.find(arm.Name());
      out.push_back({name, arm.Name(), it == entry->arm_counts.end() ? 0 : it->second->load(std::memory_order_relaxed)});
    }
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> ModelManager::StaleTemporaryCounts() const {
  std::vector<std::pair<std::string, int64_t>> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, entry] : models_) out.emplace_back(name, entry->stale_temporaries);
  return out;
}

StatusOr<std::vector<VersionStatusInfo>> ModelManager::GetModelStatus(std::string_view model,
                                                                      std::optional<int64_t> version) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = models_.find(model);
  if (it == models_.end() || it->second->versions.empty()) {
    return NotFound("Could not find any versions of model " + std::string(model));
  }
  std::vector<VersionStatusInfo> out;
  for (const auto& [v, entry] : it->second->versions) {
    if (version && v != *version) continue;
    out.push_back({v, entry.state, entry.status, entry.load_seconds});
  }
  if (out.empty()) {
    return NotFound("Could not find version " + std::to_string(*version) + " of model " + std::string(model));
  }
  return out;
}

Status ModelManager::ApplyConfig(StoreConfig config) {
  LS_RETURN_IF_ERROR(ValidateStoreConfig(config));
  Garbage garbage;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return FailedPrecondition("the model manager is stopped");

  // Labels first, against what is loaded now, so that a rejected config changes nothing.
  for (const ModelConfig& m : config.models) {
    const auto existing = models_.find(m.name);
    const ModelEntry* entry = existing == models_.end() ? nullptr : existing->second.get();
    const bool same_source = entry != nullptr && entry->config.base_path == m.base_path;
    // What the new policy keeps of what is on disk: a label on anything else would dangle as
    // soon as this config's reconcile unloads its target.
    std::set<int64_t> kept;
    if (same_source) {
      for (int64_t v : AspiredVersions(m.policy, entry->on_disk)) kept.insert(v);
    }
    for (const auto& [label, target] : m.labels) {
      if (same_source) {
        const auto v = entry->versions.find(target);
        if (v != entry->versions.end() && v->second.state == VersionState::kAvailable) {
          if (kept.count(target) != 0) continue;
          return FailedPrecondition("version_labels of model " + m.name + ": label '" + label + "' points at version " +
                                    std::to_string(target) + ", which the model's version policy would unload");
        }
      }
      bool moves_label = false;
      if (entry != nullptr) {
        const auto old = entry->config.labels.find(label);
        moves_label = old != entry->config.labels.end() && old->second != target;
      }
      if (options_.allow_version_labels_for_unavailable_models && !moves_label) continue;
      return FailedPrecondition("Request to assign label to version " + std::to_string(target) + " of model " +
                                m.name + ", which is not currently available for inference");
    }
  }

  std::map<std::string, std::unique_ptr<ModelEntry>, std::less<>> next;
  for (ModelConfig& m : config.models) {
    auto existing = models_.find(m.name);
    std::unique_ptr<ModelEntry> entry;
    // A model whose base path changed is another source: its versions are unrelated to the
    // loaded ones, so it starts over (a gap in availability, documented in the README). So
    // does one whose precision or thread count changed: every loaded version computes
    // otherwise.
    if (existing != models_.end() && existing->second->config.base_path == m.base_path &&
        existing->second->config.bf16_products == m.bf16_products &&
        existing->second->config.intra_op_threads == m.intra_op_threads) {
      entry = std::move(existing->second);
      models_.erase(existing);
      // A changed source or policy retries failed versions; moving a label or a traffic weight
      // does not (a canary flip must not reload every broken bundle of the model).
      ModelConfig without_labels = m;
      without_labels.labels = entry->config.labels;
      without_labels.traffic = entry->config.traffic;
      without_labels.shadow = entry->config.shadow;
      if (!(entry->config == without_labels)) ++entry->generation;
    } else {
      entry = std::make_unique<ModelEntry>();
      entry->incarnation = next_incarnation_++;
    }
    entry->config = std::move(m);
    next.emplace(entry->config.name, std::move(entry));
  }
  // Whatever is left was dropped from the config (or replaced): unload it all.
  for (auto& [name, entry] : models_) {
    for (auto& [v, ve] : entry->versions) {
      if (ve.loaded) {
        garbage.handles.push_back(std::move(ve.loaded));
        spdlog::info("event=version_unloaded model={} version={} reason=\"the model left the config or its base path changed\"",
                     name, v);
      }
    }
  }
  models_ = std::move(next);
  // Apply the new policies to the last listing at once; the poll below refreshes it.
  for (auto& [name, entry] : models_) {
    if (entry->listed) ReconcileLocked(*entry, {}, &garbage);
  }
  PublishLocked(&garbage);
  poll_requested_ = true;
  poll_cv_.notify_all();
  return Status::Ok();
}

void ModelManager::PollLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const auto wake = [this] { return stopping_ || poll_requested_; };
    if (options_.file_system_poll_wait_seconds > 0) {
      // Clamped to a year so that the deadline cannot overflow the clock.
      const int64_t seconds = std::min<int64_t>(options_.file_system_poll_wait_seconds, int64_t{366} * 24 * 3600);
      poll_cv_.wait_for(lock, std::chrono::seconds(seconds), wake);
    } else {
      poll_cv_.wait(lock, wake);
    }
    if (stopping_) break;
    lock.unlock();
    PollOnce();
    lock.lock();
  }
}

void ModelManager::PollNow() { PollOnce(); }

void ModelManager::PollOnce() {
  std::lock_guard<std::mutex> poll_lock(poll_mu_);
  std::vector<PollWork> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    ++polls_running_;
    poll_requested_ = false;
    for (const auto& [name, entry] : models_) {
      PollWork w;
      w.name = name;
      w.incarnation = entry->incarnation;
      w.base_path = entry->config.base_path;
      for (const auto& [v, ve] : entry->versions) {
        if (ve.state == VersionState::kEnd && !ve.status.ok()) w.failed.push_back(v);
      }
      work.push_back(std::move(w));
    }
  }
  // The disk is read without the lock: a slow file system delays polls, never requests.
  for (PollWork& w : work) {
    w.listing = ListStoredVersions(w.base_path.string(), options_.storage);
    if (!IsS3Url(w.base_path.string())) {
      w.stale_temporaries = static_cast<int64_t>(FindStaleTemporaries(w.base_path).size());
    }
    for (int64_t v : w.failed) w.fingerprints[v] = StoredVersionFingerprint(w.base_path.string(), v, options_.storage);
  }
  {
    Garbage garbage;
    std::lock_guard<std::mutex> lock(mu_);
    ApplyListingsLocked(work, &garbage);
    // Under the lock, so that no version can start loading from what is being removed.
    PruneCachesLocked();
  }
  // Idle only once what the poll released is gone, so that WaitUntilIdle means settled.
  std::lock_guard<std::mutex> lock(mu_);
  --polls_running_;
  idle_cv_.notify_all();
}

void ModelManager::PruneCachesLocked() {
  for (const auto& [name, entry] : models_) {
    if (!IsS3Url(entry->config.base_path)) continue;
    std::set<int64_t> keep(entry->aspired.begin(), entry->aspired.end());
    for (const auto& [v, ve] : entry->versions) {
      if (ve.state != VersionState::kEnd) keep.insert(v);
    }
    PruneCachedVersions(entry->config.base_path, keep, options_.storage);
  }
}

void ModelManager::ApplyListingsLocked(std::vector<PollWork>& work, Garbage* garbage) {
  for (PollWork& w : work) {
    const auto it = models_.find(w.name);
    if (it == models_.end() || it->second->incarnation != w.incarnation) continue;
    ModelEntry& entry = *it->second;
    if (w.stale_temporaries != entry.stale_temporaries && w.stale_temporaries > 0) {
      spdlog::warn("event=stale_temporaries model={} base_path={} count={} why=\"a writer died mid-export; "
                   "model-train and model-cli remove them when they next write there\"",
                   w.name, w.base_path.string(), w.stale_temporaries);
    }
    entry.stale_temporaries = w.stale_temporaries;
    if (!w.listing.ok()) {
      // Keep serving what is loaded: a base path that vanishes for a moment (a remount, a
      // sync tool) must not take the model down.
      if (entry.last_source_error != w.listing.status().message()) {
        entry.last_source_error = w.listing.status().message();
        spdlog::warn("event=source_error model={} error=\"{}\"", w.name, entry.last_source_error);
      }
      continue;
    }
    entry.last_source_error.clear();
    entry.listed = true;
    entry.on_disk = std::move(w.listing).value();
    ReconcileLocked(entry, w.fingerprints, garbage);
  }
  PublishLocked(garbage);
}

void ModelManager::ReconcileLocked(ModelEntry& entry, const std::map<int64_t, std::string>& fingerprints,
                                   Garbage* garbage) {
  entry.aspired = AspiredVersions(entry.config.policy, entry.on_disk);
  const bool resource_preserving = entry.config.transition == ModelConfig::Transition::kResourcePreserving;
  std::vector<std::weak_ptr<const LoadedVersion>> released;
  if (resource_preserving) TransitionLocked(entry, garbage, &released);
  for (int64_t v : entry.aspired) {
    auto [it, inserted] = entry.versions.try_emplace(v);
    VersionEntry& ve = it->second;
    bool load = inserted;
    if (!inserted && ve.state == VersionState::kEnd) {
      if (ve.status.ok()) {
        load = true;  // unloaded earlier, wanted again (a rollback)
      } else {
        const auto fp = fingerprints.find(v);
        load = ve.failed_generation != entry.generation || (fp != fingerprints.end() && fp->second != ve.fingerprint);
      }
    }
    if (!load) continue;
    ve = VersionEntry{};  // START
    load_queue_.push_back({entry.config.name, entry.incarnation, v, VersionDir(entry.config.base_path, v),
                           entry.config.base_path, entry.config.bf16_products, entry.config.intra_op_threads,
                           released});
    load_cv_.notify_one();
  }
  // Forget versions that ended and whose directory is gone; their history is of no use.
  const std::set<int64_t> on_disk(entry.on_disk.begin(), entry.on_disk.end());
  std::erase_if(entry.versions, [&](const auto& kv) {
    return kv.second.state == VersionState::kEnd && on_disk.count(kv.first) == 0;
  });
  TransitionLocked(entry, garbage);
}

void ModelManager::TransitionLocked(ModelEntry& entry, Garbage* garbage,
                                    std::vector<std::weak_ptr<const LoadedVersion>>* released) {
  const std::set<int64_t> aspired(entry.aspired.begin(), entry.aspired.end());
  bool aspired_available = false;
  std::vector<int64_t> unwanted;  // available but no longer aspired, ascending
  for (const auto& [v, ve] : entry.versions) {
    if (ve.state != VersionState::kAvailable) continue;
    if (aspired.count(v) != 0) {
      aspired_available = true;
    } else {
      unwanted.push_back(v);
    }
  }
  // Availability preserving: while no aspired version is available (still loading, failed,
  // or none on disk), the newest of the others keeps serving.
  const bool resource_preserving = entry.config.transition == ModelConfig::Transition::kResourcePreserving;
  if (!aspired_available && !unwanted.empty() && !resource_preserving) unwanted.pop_back();
  for (int64_t v : unwanted) {
    VersionEntry& ve = entry.versions[v];
    if (released != nullptr) released->push_back(ve.loaded);
    ve.bytes = 0;
    ve.state = VersionState::kUnloading;
    garbage->handles.push_back(std::move(ve.loaded));
    ve.loaded.reset();
    // Requests in flight keep their handle; the version is freed when the last one ends.
    ve.state = VersionState::kEnd;
    spdlog::info("event=version_unloaded model={} version={}", entry.config.name, v);
  }
}

void ModelManager::PublishLocked(Garbage* garbage) {
  auto snapshot = std::make_shared<ServingSnapshot>();
  for (const auto& [name, entry] : models_) {
    ServingSnapshot::Model& m = snapshot->models[name];
    m.policy = entry->config.policy;
    m.labels.insert(entry->config.labels.begin(), entry->config.labels.end());
    bool loading = false;
    for (const auto& [v, ve] : entry->versions) {
      if (ve.state == VersionState::kAvailable) m.versions.emplace(v, ve.loaded);
      loading = loading || ve.state == VersionState::kStart || ve.state == VersionState::kLoading;
    }
    m.between_versions = entry->config.transition == ModelConfig::Transition::kResourcePreserving &&
                         m.versions.empty() && loading;
    for (const TrafficArm& arm : entry->config.traffic) {
      ServableHandle servable;
      const auto label = entry->config.labels.find(arm.label);
      const int64_t target = arm.label.empty() ? arm.version : label == entry->config.labels.end() ? 0 : label->second;
      if (const auto it = m.versions.find(target); it != m.versions.end()) servable = it->second;
      m.arms.push_back({RoutingHash(arm.Name()), servable ? static_cast<double>(arm.weight) : 0.0});
      m.arm_servables.push_back(std::move(servable));
      // An arm's count lives as long as the arm stays in the config, across snapshots.
      std::shared_ptr<std::atomic<uint64_t>>& count = entry->arm_counts[arm.Name()];
      if (count == nullptr) count = std::make_shared<std::atomic<uint64_t>>(0);
      m.arm_counts.push_back(count);
    }
    if (const std::optional<ShadowTraffic>& shadow = entry->config.shadow) {
      const auto label = entry->config.labels.find(shadow->label);
      const int64_t target =
          shadow->label.empty() ? shadow->version : label == entry->config.labels.end() ? 0 : label->second;
      if (const auto it = m.versions.find(target); it != m.versions.end()) {
        m.shadow = it->second;
        m.shadow_percent = shadow->percent;
      }
    }
    const std::vector<TrafficArm>& traffic = entry->config.traffic;  // (lambdas cannot name bindings in clang 14)
    std::erase_if(entry->arm_counts, [&](const auto& kv) {
      return std::none_of(traffic.begin(), traffic.end(), [&](const TrafficArm& arm) { return arm.Name() == kv.first; });
    });
  }
  std::shared_ptr<const ServingSnapshot> published = std::move(snapshot);
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_.swap(published);
  garbage->snapshots.push_back(std::move(published));
}

bool ModelManager::IdleLocked() const {
  return !poll_requested_ && polls_running_ == 0 && load_queue_.empty() && loads_running_ == 0;
}

bool ModelManager::WaitUntilIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return stopping_ || IdleLocked(); });
}

}  // namespace lockstep
