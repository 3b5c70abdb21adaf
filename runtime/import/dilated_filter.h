// Dilated convolutions, as both importers (SavedModel, ONNX) run them: a convolution whose
// filter taps lie d pixels apart is the plain convolution with a filter that has d - 1 zeros
// between its taps, since adding exact zeros leaves every sum as it was. So a dilated
// convolution of a constant filter needs no kernel of its own; its cost grows with the spread
// filter's extent, which is bounded.
#pragma once

#include <cstdint>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

// The largest extent, (k - 1) * d + 1, a spread filter may have along one axis.
inline constexpr int64_t kMaxDilatedExtent = 1024;

// `filter` (float32) with its spatial axes `h_axis` and `h_axis + 1` spread by `dh` and `dw`:
// [..., KH, KW, ...] becomes [..., (KH - 1) * dh + 1, (KW - 1) * dw + 1, ...]. Unimplemented for
// another dtype, or an extent past kMaxDilatedExtent.
StatusOr<Tensor> DilateFilter(const Tensor& filter, int h_axis, int64_t dh, int64_t dw);

}  // namespace lockstep
