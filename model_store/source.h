// The source: which versions of a model exist on disk. A version is a directory
// <base_path>/<N>/ whose name is the canonical decimal form of a positive int64: digits only,
// no sign, no spaces, no leading zero. "007" is ignored rather than read as 7 (as strtoll
// would): with canonical names each version number has exactly one directory,
// <base_path>/std::to_string(N), and "7" beside "007" cannot be ambiguous. Everything else
// (files, ".tmp-*" directories a writer is still filling, "0", "-3", "v2") is ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

// The version a directory name denotes, or nullopt when the name is not a version.
std::optional<int64_t> ParseVersionDirName(std::string_view name);

// The directory of `version` under `base_path`.
std::filesystem::path VersionDir(const std::filesystem::path& base_path, int64_t version);

// The versions under `base_path`, ascending. NotFound if base_path does not exist,
// FailedPrecondition if it is not a directory or cannot be read.
StatusOr<std::vector<int64_t>> ListVersions(const std::filesystem::path& base_path);

}  // namespace lockstep
