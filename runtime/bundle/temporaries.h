// The temporary directories a bundle writer fills beside its destination (".tmp-<name>-<random>",
// bundle_writer.cc) before renaming one into place. Each writer holds an advisory lock (flock)
// on its temporary directory for as long as it writes, so a temporary that nobody locks and
// that has not changed for a minute was left by a writer that died (a kill -9 mid-export) and
// will never be finished. Writers (model-train, model-cli) remove those in the directory they
// write to; model-server, which only reads its model directories, only counts them.
#pragma once

#include <chrono>
#include <filesystem>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

inline constexpr std::chrono::seconds kStaleTemporaryAge{60};

// A temporary directory created and locked for a writer's life: unlocked and closed when this
// goes (the caller removes or renames the directory first).
class LockedTemporaryDir {
 public:
  // Creates `path` (mode 0755) and locks it.
  static StatusOr<LockedTemporaryDir> Create(const std::filesystem::path& path);
  LockedTemporaryDir(LockedTemporaryDir&& other) noexcept;
  LockedTemporaryDir& operator=(LockedTemporaryDir&& other) noexcept;
  LockedTemporaryDir(const LockedTemporaryDir&) = delete;
  LockedTemporaryDir& operator=(const LockedTemporaryDir&) = delete;
  ~LockedTemporaryDir();

 private:
  explicit LockedTemporaryDir(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Whether a directory entry's name is a bundle writer's temporary.
bool IsTemporaryName(std::string_view name);

// The temporaries directly in `dir` that no writer locks and that have not changed for
// `min_age`. A directory that cannot be read has none.
std::vector<std::filesystem::path> FindStaleTemporaries(const std::filesystem::path& dir,
                                                        std::chrono::seconds min_age = kStaleTemporaryAge);

// Removes FindStaleTemporaries(dir), each logged; returns how many went. Best effort: one that
// cannot be removed is logged and left.
int RemoveStaleTemporaries(const std::filesystem::path& dir, std::chrono::seconds min_age = kStaleTemporaryAge);

}  // namespace lockstep
