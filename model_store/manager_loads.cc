// The manager's load threads: each takes a queued version, fetches it (an S3 version into the
// cache), reserves its memory, loads and warms it up, and publishes the result.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "model_store/manager.h"
#include "model_store/manager_state.h"
#include "model_store/source.h"

namespace lockstep {

// The nice value of the load threads: well below the serving threads' share of a core.
constexpr int kLoadThreadNice = 10;

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

}  // namespace lockstep
