// The layout of the weights, shared by the writer and the reader so that both sides of the
// format live in one place:
//   - they are one stream of bytes, stored as weights.bin or, past kBundleWeightShardBytes by default,
//     as shards (below); model.pb's WeightEntry gives each weight's offset and size in bytes;
//   - each weight starts at an offset that is a multiple of kWeightAlignment, the gap before
//     it filled with zero bytes;
//   - float32, float64, bfloat16, int32, int64 and bool elements are stored raw, little-endian, so
//     the reader can hand out views into the file's image without copying;
//   - a string tensor stores, per element, a little-endian uint64 byte count, then the bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "proto/lockstep/bundle.pb.h"
#include "runtime/bundle/file_io.h"
#include "runtime/bundle/file_image.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/sha256.h"
#include "runtime/graph.h"

namespace lockstep {

// 64 = kTensorAlignment: a view into the page-aligned image is as aligned as owned storage,
// which is what the vectorised kernels assume.
inline constexpr uint64_t kWeightAlignment = 64;

// Shards. SHA-256 is one sequential stream (1.8 GB/s a core on our machines), and a reader
// must hash every byte before it serves one; a stream cut into files can be hashed on every
// core at once. So weights of more than one shard's length (bundle.h) are written as
// weights-00000-of-00004.bin, weights-00001-of-00004.bin, ..., each a shard long but the
// last, each with its own line in MANIFEST.sha256 (`sha256sum -c` still checks them), as
// TensorFlow cuts variables.data-0000k-of-0000n. Offsets count across the whole stream:
// `cat weights-*.bin` is what weights.bin would have been, and a weight may span two shards.
// A reader takes any split (shards of any length); it refuses an incomplete set.
inline constexpr int kMaxWeightShards = 99999;  // five digits in the name

// "weights.bin" when `count` is 1, else "weights-<index>-of-<count>.bin", five digits each.
std::string WeightFileName(int index, int count);

// The weight files `manifest` lists, in stream order: weights.bin alone, or every shard of one
// count (at least 2). DataLoss for none, both, or a partial or mixed set; the caller names
// the manifest.
StatusOr<std::vector<std::string>> ListedWeightFiles(const std::vector<ManifestEntry>& manifest);

// Writes every weight into the directory `dir`, as one file or as shards of `shard_bytes`
// (options.weight_shard_bytes, bundle.h), records a WeightEntry for each in `out`, and returns
// the files written with their SHA-256 (hashed as written, so the manifest needs no second read).
StatusOr<std::vector<ManifestEntry>> WriteWeights(const WeightMap& weights, const std::filesystem::path& dir,
                                                  uint64_t shard_bytes, proto::BundleDef* out);

// Checks every WeightEntry of `def` against the weights file's image and builds the weights:
// read-only views into the image for fixed-size dtypes (the image is their owner), owned
// copies for strings. Entry problems are InvalidArgument, data that does not fit the entry
// (past the end, malformed strings) DataLoss; messages name model.pb or `weights_name` (the
// weight file, or the set of shards).
StatusOr<WeightMap> DecodeWeights(const proto::BundleDef& def, const std::shared_ptr<const FileImage>& weights,
                                  std::string_view weights_name);

}  // namespace lockstep
