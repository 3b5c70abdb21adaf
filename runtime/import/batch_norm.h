// What the importers share about batch normalisation at inference: ONNX's BatchNormalization
// and TensorFlow's FusedBatchNorm(V3) both compute y = (x - mean) / sqrt(var + epsilon) * scale
// + offset per channel with constant statistics, which is one multiply and one add:
//   y = x * s + (offset - mean * s),  s = scale / sqrt(var + epsilon),
// folded here once, in float64, at import.
#pragma once

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

struct FoldedBatchNorm {
  Tensor scale;   // s
  Tensor offset;  // offset - mean * s
};

// `scale`, `offset`, `mean` and `variance` are vectors of one length C (any real dtype); the
// results are of `dtype` and shape `shape` (C elements: [C] for channels-last inputs,
// [C, 1, 1] for NCHW images).
StatusOr<FoldedBatchNorm> FoldBatchNorm(const Tensor& scale, const Tensor& offset, const Tensor& mean,
                                        const Tensor& variance, double epsilon, DType dtype, const Shape& shape);

}  // namespace lockstep
