// The source: which versions of a model exist on disk. A version is a directory
// <base_path>/<N>/ whose name is a positive int64 in decimal digits: no sign, no spaces.
// Leading zeros are allowed, as TensorFlow Serving allows them ("00000123" is version 123, the
// way TensorFlow exports name their directories); where "7" and "007" both exist, the
// directory of version 7 is the one with the fewest leading zeros. Everything else (files,
// ".tmp-*" directories a writer is still filling, "0", "000", "-3", "v2") is ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

// The version a directory name denotes, or nullopt when the name is not a version.
std::optional<int64_t> ParseVersionDirName(std::string_view name);

// The directory of `version` under `base_path`: <base_path>/<version> when it exists, else the
// version's directory with the fewest leading zeros, else (none on disk) <base_path>/<version>.
std::filesystem::path VersionDir(const std::filesystem::path& base_path, int64_t version);

// The versions under `base_path`, ascending. NotFound if base_path does not exist,
// FailedPrecondition if it is not a directory or cannot be read.
StatusOr<std::vector<int64_t>> ListVersions(const std::filesystem::path& base_path);

// What identifies the contents of a version directory cheaply: its inode (WriteBundle with
// overwrite renames a new directory into place) and every file's path, size and mtime. The
// manager retries a failed version when this changes.
std::string DirFingerprint(const std::filesystem::path& dir);

// The bytes of the regular files under `dir`: what a version is charged against the manager's
// memory budget (its weights dominate; a SavedModel's or ONNX model's files likewise).
int64_t DirBytes(const std::filesystem::path& dir);

}  // namespace lockstep
