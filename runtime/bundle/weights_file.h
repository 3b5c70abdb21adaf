// The layout of weights.bin, shared by the writer and the reader so that both sides of the
// format live in one place:
//   - each weight starts at an offset that is a multiple of kWeightAlignment, the gap before
//     it filled with zero bytes; model.pb's WeightEntry gives its offset and size in bytes;
//   - float32, float64, bfloat16, int32, int64 and bool elements are stored raw, little-endian, so
//     the reader can hand out views into the file's image without copying;
//   - a string tensor stores, per element, a little-endian uint64 byte count, then the bytes.
#pragma once

#include <cstdint>
#include <memory>

#include "proto/lockstep/bundle.pb.h"
#include "runtime/bundle/file_io.h"
#include "runtime/bundle/file_image.h"
#include "runtime/bundle/sha256.h"
#include "runtime/graph.h"

namespace lockstep {

// 64 = kTensorAlignment: a view into the page-aligned image is as aligned as owned storage,
// which is what the vectorised kernels assume.
inline constexpr uint64_t kWeightAlignment = 64;

// Appends every weight to `file` (and to `hasher`, so the manifest needs no second read) and
// records a WeightEntry for each in `out`.
Status WriteWeights(const WeightMap& weights, WritableFile& file, Sha256Hasher& hasher, proto::BundleDef* out);

// Checks every WeightEntry of `def` against the weights file's image and builds the weights:
// read-only views into the image for fixed-size dtypes (the image is their owner), owned
// copies for strings. Entry problems are InvalidArgument, data that does not fit the entry
// (past the end, malformed strings) DataLoss; messages name model.pb or weights.bin.
StatusOr<WeightMap> DecodeWeights(const proto::BundleDef& def, const std::shared_ptr<const FileImage>& weights);

}  // namespace lockstep
