// The bundle: Lockstep's SavedModel. A version directory <base_path>/<version>/ holding
//
//   model.pb          BundleDef (proto/lockstep/bundle.proto): format version, graph,
//                     signatures, metadata, and the index of weights.bin
//   weights.bin       every weight, each at a 64-byte-aligned offset; read whole into memory.
//                     Past 32 MiB, shards instead: weights-00000-of-0000N.bin, ..., read and
//                     hashed on every core at once (weights_file.h)
//   MANIFEST.sha256   "<sha256 hex>  <relative path>" per file, the format `sha256sum -c` reads
//   assets/           optional files the model carries (vocabularies, ...)
//   assets.extra/     optional files for the server rather than the model, as in a SavedModel:
//                     tf_serving_warmup_requests (server/warmup.h)
//
// The writer builds the directory beside its destination and renames it into place, so a
// reader never sees half a bundle. The reader checks everything before anything runs and
// answers a Status that names the file and what is wrong; a truncated, corrupted or hostile
// bundle is an error, never a crash or an unbounded allocation. A bundle is immutable once
// written: replace it by writing a new version directory. What was read stays as it was read:
// deleting, truncating or rewriting the files of a loaded bundle does not touch it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "runtime/graph.h"
#include "runtime/status.h"

namespace lockstep {

inline constexpr std::string_view kBundleGraphFile = "model.pb";
inline constexpr std::string_view kBundleWeightsFile = "weights.bin";
inline constexpr std::string_view kBundleManifestFile = "MANIFEST.sha256";
inline constexpr std::string_view kBundleAssetsDir = "assets";
inline constexpr std::string_view kBundleExtrasDir = "assets.extra";
inline constexpr uint32_t kBundleFormatVersion = 1;
// The default length of a weight shard (weights_file.h).
inline constexpr uint64_t kBundleWeightShardBytes = uint64_t{32} << 20;

struct BundleWriteOptions {
  // Files to place under assets/: relative path -> contents.
  std::map<std::string, std::string> assets = {};
  // Files to place under assets.extra/: relative path -> contents.
  std::map<std::string, std::string> extras = {};
  // Replace an existing directory at the destination (atomically where the OS allows).
  bool overwrite = false;
  // Weights longer than this are written as shards of this length (weights_file.h).
  uint64_t weight_shard_bytes = kBundleWeightShardBytes;
};

// Validates `model` (AnalyzeGraph) and writes it as a bundle at `dir`, which must not exist
// unless options.overwrite is set.
Status WriteBundle(const Model& model, const std::filesystem::path& dir,
                   const BundleWriteOptions& options = {});

// Reads and fully validates the bundle at `dir`. Weights are read-only views into one
// in-memory image of the weights file, or of its shards end to end (file_image.h), freed when
// the last of them goes. Shards are read and hashed on up to one thread per core.
StatusOr<Model> ReadBundle(const std::filesystem::path& dir);

}  // namespace lockstep
