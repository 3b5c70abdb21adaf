#include "model_store/manager.h"

#include "runtime/bundle/temporaries.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
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

// The nice value of the load threads: well below the serving threads' share of a core.
constexpr int kLoadThreadNice = 10;

struct ModelManager::VersionEntry {
  VersionState state = VersionState::kStart;
  Status status;           // the load error, for a version that failed
  ServableHandle loaded;   // while AVAILABLE
  std::string fingerprint; // of the directory as it was when the failed load read it
  uint64_t failed_generation = 0;  // ModelEntry::generation when the load failed
  double load_seconds = 0;         // of the last load, successful or not
  int64_t bytes = 0;               // its directory's files, while loading or loaded (the memory budget)
};

struct ModelManager::ModelEntry {
  ModelConfig config;
  uint64_t incarnation = 0;  // a model removed and added again is a new one
  uint64_t generation = 0;   // bumped when a config changes this model's entry
  std::map<int64_t, VersionEntry> versions;
  bool listed = false;             // on_disk holds a successful listing
  std::vector<int64_t> on_disk;
  std::vector<int64_t> aspired;
  // Requests each traffic-split arm has served, by arm name (TrafficArm::Name).
  std::map<std::string, std::shared_ptr<std::atomic<uint64_t>>> arm_counts;
  std::string last_source_error;  // logged once per distinct error, not on every poll
  int64_t stale_temporaries = 0;  // in the base path at the last poll (runtime/bundle/temporaries.h)
};

// Objects whose destruction may be slow (a Session and its mapped weights): collected under
// the lock, destroyed after it is released. Declared before the lock_guard so that it dies
// after the guard.
struct ModelManager::Garbage {
  std::vector<ServableHandle> handles;
  std::vector<std::shared_ptr<const ServingSnapshot>> snapshots;
};

// One model's share of a poll: what to list, read under the lock; the listing, read without it.
struct ModelManager::PollWork {
  std::string name;
  uint64_t incarnation = 0;
  std::filesystem::path base_path;
  std::vector<int64_t> failed;  // versions whose last load failed
  StatusOr<std::vector<int64_t>> listing = Internal("not listed");
  std::map<int64_t, std::string> fingerprints;  // of the failed versions' directories
  int64_t stale_temporaries = 0;                 // counted, never removed: the server only reads
};

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

void ModelManager::LoadLoop() {
  // Loads (reading, checking and packing a bundle, warming it up) run at a lower priority than
  // the threads serving requests: a large version arriving must not slow the models already
  // serving (bench/serving/run_load_isolation.sh measures it). Linux applies nice per thread.
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kLoadThreadNice) != 0) {
    spdlog::warn("event=load_thread_priority_unchanged error=\"{}\"", std::strerror(errno));
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    load_cv_.wait(lock, [this] { return stopping_ || !load_queue_.empty(); });
    if (stopping_) return;
    LoadTask task = std::move(load_queue_.front());
    load_queue_.pop_front();
    const auto find = [&]() -> VersionEntry* {
      const auto it = models_.find(task.model);
      if (it == models_.end() || it->second->incarnation != task.incarnation) return nullptr;
      const auto v = it->second->versions.find(task.version);
      return v == it->second->versions.end() ? nullptr : &v->second;
    };
    VersionEntry* ve = find();
    if (ve == nullptr || ve->state != VersionState::kStart) {
      idle_cv_.notify_all();
      continue;
    }
    ve->state = VersionState::kLoading;
    ++loads_running_;
    lock.unlock();

    WaitUntilReleased(task);
    // An S3 version is downloaded into the cache first (a local one is where it is). A download
    // that failed (the server gone mid-transfer, an object deleted since the listing) leaves a
    // fingerprint no listing matches, so the next poll tries it again.
    StatusOr<FetchedVersion> fetched = FetchVersion(task.base_path, task.version, options_.storage);
    const std::string fingerprint =
        fetched.ok() ? fetched->fingerprint : "fetch failed: " + fetched.status().ToString();
    if (fetched.ok()) task.dir = fetched->dir;
    const auto load_start = std::chrono::steady_clock::now();
    SessionOptions session_options = options_.session_options;
    session_options.bf16_products = task.bf16_products;
    // A pool of the version's own: the version holds it, so it lives while any request does.
    std::shared_ptr<ThreadPool> pool;
    if (task.intra_op_threads > 0) pool = std::make_shared<ThreadPool>(task.intra_op_threads);
    const Status reserved = fetched.ok() ? ReserveMemory(task) : fetched.status();
    StatusOr<ServableHandle> loaded =
        reserved.ok() ? LoadVersion(task.model, task.version, task.dir, session_options, options_.enable_model_warmup,
                                    std::move(pool))
                      : StatusOr<ServableHandle>(reserved);
    if (loaded.ok() && options_.enable_model_warmup && options_.warm_up) {
      if (Status warmed = options_.warm_up(*loaded); !warmed.ok()) {
        loaded = warmed.WithPrefix("model '" + task.model + "' version " + std::to_string(task.version));
      }
    }
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

    Garbage garbage;
    lock.lock();
    ve = find();
    if (ve != nullptr && ve->state == VersionState::kLoading) {
      ve->load_seconds = load_seconds;
      if (loaded.ok()) {
        ve->state = VersionState::kAvailable;
        ve->status = Status::Ok();
        ve->loaded = std::move(loaded).value();
        spdlog::info("event=version_available model={} version={} load_s={:.3f} intra_op_threads={}", task.model,
                     task.version, load_seconds, ve->loaded->threads());
      } else {
        ve->state = VersionState::kEnd;
        ve->bytes = 0;
        ve->status = loaded.status();
        ve->fingerprint = fingerprint;
        ve->failed_generation = models_.find(task.model)->second->generation;
        spdlog::error("event=version_load_failed model={} version={} error=\"{}\"", task.model, task.version,
                      loaded.status().ToString());
      }
      TransitionLocked(*models_.find(task.model)->second, &garbage);
      PublishLocked(&garbage);
    } else if (loaded.ok()) {
      garbage.handles.push_back(std::move(loaded).value());  // its model left the config meanwhile
    }
    // Destroy what was released without holding the lock, and only then count the load as
    // done, so that WaitUntilIdle means settled.
    lock.unlock();
    garbage = Garbage{};
    lock.lock();
    --loads_running_;
    idle_cv_.notify_all();
  }
}

void ModelManager::WaitUntilReleased(const LoadTask& task) const {
  // Requests are short: a millisecond's poll finds the moment the last one lets go without a
  // notification from every handle's destructor.
  constexpr auto kPatience = std::chrono::seconds(60);
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (const std::weak_ptr<const LoadedVersion>& old : task.released_first) {
    while (!old.expired()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;  // the load that follows is dropped: its model is going away
      }
      if (std::chrono::steady_clock::now() > deadline) {
        spdlog::warn("event=release_wait_timeout model={} version={} why=\"requests still hold an unloaded "
                     "version after {} s; loading anyway\"",
                     task.model, task.version, kPatience.count());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

Status ModelManager::ReserveMemory(const LoadTask& task) {
  if (options_.max_model_memory_bytes <= 0) return Status::Ok();
  const int64_t bytes = DirBytes(task.dir);
  std::lock_guard<std::mutex> lock(mu_);
  int64_t held = 0;
  for (const auto& [name, entry] : models_) {
    for (const auto& [v, ve] : entry->versions) held += ve.bytes;
  }
  if (held + bytes > options_.max_model_memory_bytes) {
    return Status(StatusCode::kResourceExhausted,
                  "loading version " + std::to_string(task.version) + " of model " + task.model + " needs " +
                      std::to_string(bytes) + " bytes, and the loaded versions hold " + std::to_string(held) +
                      " of the --max_model_memory_bytes budget of " + std::to_string(options_.max_model_memory_bytes) +
                      " (version_transition resource_preserving unloads the old version first)");
  }
  const auto it = models_.find(task.model);
  if (it != models_.end()) {
    if (const auto v = it->second->versions.find(task.version); v != it->second->versions.end()) v->second.bytes = bytes;
  }
  return Status::Ok();
}

bool ModelManager::IdleLocked() const {
  return !poll_requested_ && polls_running_ == 0 && load_queue_.empty() && loads_running_ == 0;
}

bool ModelManager::WaitUntilIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return stopping_ || IdleLocked(); });
}

}  // namespace lockstep
