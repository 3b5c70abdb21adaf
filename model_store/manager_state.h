// The manager's bookkeeping (manager.h's private parts): what it knows of each model and
// version, what a poll reads, what is destroyed after its lock is released. Shared by
// manager.cc (configs, polls, transitions, the snapshot) and manager_loads.cc (the load threads).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model_store/manager.h"

namespace lockstep {

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

}  // namespace lockstep
