// ONNX's padding of a sliding window along one spatial axis (auto_pad, pads, ceil_mode), as
// explicit amounts before and after the image. One function, so that the importer (which
// knows an image's size at load) and the WindowPads op (which learns it per run) can never
// pad differently.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lockstep {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

struct AxisPads {
  int64_t begin = 0;
  int64_t end = 0;
};

// `in`: the image's size along the axis (>= 0); `extent`: the window's, its taps spread by the
// dilation; `given`: the node's pads (used for kNotSet only). SAME pads so that the output is
// ceil(in / stride), the odd one after (UPPER) or before (LOWER). With `ceil_mode`, the end is
// padded further so that a last window that starts inside the image (or the padding before it)
// fits.
inline AxisPads OnnxAxisPads(int64_t in, int64_t extent, int64_t stride, AutoPad mode, AxisPads given, bool ceil_mode) {
  AxisPads p;
  if (mode == AutoPad::kNotSet) p = given;
  if (mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower) {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((out - 1) * stride + extent - in, 0);
    p.begin = mode == AutoPad::kSameLower ? total - total / 2 : total / 2;
    p.end = total - p.begin;
  }
  if (ceil_mode) {
    const int64_t span = in + p.begin + p.end - extent;
    const int64_t out = (span + stride - 1) / stride + 1;
    // A last window that would start in the end's padding is dropped, as onnxruntime and
    // PyTorch drop it.
    if (span >= 0) {
      // The end padded (or trimmed) so that the windows that remain fit exactly; never below
      // what was given unless a window is dropped, which ceil's count then exceeds by one.
      const int64_t windows = (out - 1) * stride >= in + p.begin ? out - 1 : out;
      p.end = std::max<int64_t>((windows - 1) * stride + extent - in - p.begin, 0);
    }
  }
  return p;
}

}  // namespace lockstep
