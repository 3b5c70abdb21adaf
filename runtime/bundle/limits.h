// Bounds on what a bundle reader will take in. A bundle may come from anywhere; each limit is
// far above what a real model needs and low enough that a hostile bundle cannot make the
// reader allocate or walk without bound.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep {

// model.pb holds the graph and the weights' index, never weight data.
inline constexpr uint64_t kMaxModelProtoBytes = uint64_t{1} << 30;
// One line per file.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{16} << 20;
inline constexpr size_t kMaxBundlePathLength = 1024;
// Entries (files and directories) the reader will visit looking for unlisted files, and how
// deep it will descend.
inline constexpr size_t kMaxBundleEntries = 100000;
inline constexpr int kMaxBundleDepth = 32;

}  // namespace lockstep
