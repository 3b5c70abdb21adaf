// The geometry of NHWC sliding-window ops (Conv2D, the pools and their gradients), shared so
// that a forward op and its gradient can never disagree about where a window lies. Internal
// to runtime/ops/. Padding follows TensorFlow:
//   VALID: out = (in - k) / s + 1, no padding (in < k is an error);
//   SAME:  out = ceil(in / s), pad_total = max((out - 1) * s + k - in, 0), of which
//          pad_total / 2 goes before (top/left) and the rest, one more when odd, after.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"

namespace lockstep {

// One spatial dimension of a sliding window.
struct Window {
  int64_t out = 0;         // -1 when the input size is unknown
  int64_t pad_before = 0;  // top or left
};

// Attr "padding": "SAME" / "VALID" (default "VALID"; lower case accepted). True for SAME.
inline StatusOr<bool> ReadSamePadding(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view padding, attrs.GetStringViewOr("padding", "VALID"));
  if (padding == "SAME" || padding == "same") return true;
  if (padding == "VALID" || padding == "valid") return false;
  return InvalidArgument(Str(op) + ": attr 'padding' must be SAME or VALID, got '" + Str(padding) + "'");
}

inline StatusOr<Window> ComputeWindow(std::string_view op, std::string_view dim_name, int64_t in, int64_t k,
                                      int64_t stride, bool same) {
  if (in < 0 || k < 0) return Window{-1, 0};
  if (same) {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t pad_total = std::max<int64_t>((out - 1) * stride + k - in, 0);
    return Window{out, pad_total / 2};
  }
  if (in < k) {
    return InvalidArgument(Str(op) + ": window " + std::to_string(k) + " is larger than the input " +
                           Str(dim_name) + " " + std::to_string(in) + " with VALID padding");
  }
  return Window{(in - k) / stride + 1, 0};
}

// Everything a kernel needs about one NHWC sliding-window op. A dilated window (the
// convolutions' attr "dilations") reads taps dh and dw apart: its extent is (k - 1) * d + 1.
struct Geometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  Window wh, ww;
  Shape out;

  int64_t pixels_per_image() const { return wh.out * ww.out; }
  // The input rows [h_lo, h_hi) and columns [w_lo, w_hi) under output (oh, ow)'s window,
  // the padding cut off (undilated windows: the pools').
  int64_t row_begin(int64_t oh) const { return std::max<int64_t>(oh * sh - wh.pad_before, 0); }
  int64_t row_end(int64_t oh) const { return std::min(oh * sh - wh.pad_before + kh, h); }
  int64_t col_begin(int64_t ow) const { return std::max<int64_t>(ow * sw - ww.pad_before, 0); }
  int64_t col_end(int64_t ow) const { return std::min(ow * sw - ww.pad_before + kw, w); }
};

// `input` is NHWC; the window is kh x kw, its taps `dilations` apart; `cout` is the output depth.
inline StatusOr<Geometry> MakeGeometry(std::string_view op, const Shape& input, int64_t kh, int64_t kw,
                                       std::pair<int64_t, int64_t> strides, bool same, int64_t cout,
                                       std::pair<int64_t, int64_t> dilations = {1, 1}) {
  LS_RETURN_IF_ERROR(CheckRank(op, "input (NHWC)", input, 4));
  if (kh == 0 || kw == 0) {
    return InvalidArgument(Str(op) + ": window " + std::to_string(kh) + "x" + std::to_string(kw) +
                           " is empty");
  }
  Geometry g;
  g.n = input.dim(0);
  g.h = input.dim(1);
  g.w = input.dim(2);
  g.c = input.dim(3);
  g.kh = kh;
  g.kw = kw;
  g.sh = strides.first;
  g.sw = strides.second;
  g.dh = dilations.first;
  g.dw = dilations.second;
  const int64_t extent_h = kh < 0 ? -1 : (kh - 1) * g.dh + 1, extent_w = kw < 0 ? -1 : (kw - 1) * g.dw + 1;
  LS_ASSIGN_OR_RETURN(g.wh, ComputeWindow(op, "height", g.h, extent_h, g.sh, same));
  LS_ASSIGN_OR_RETURN(g.ww, ComputeWindow(op, "width", g.w, extent_w, g.sw, same));
  g.out = Shape{g.n, g.wh.out, g.ww.out, cout};
  return g;
}

// A backward op's incoming gradient must have the forward output's shape.
inline Status CheckOutputGradient(std::string_view op, const Shape& dy, const Geometry& g) {
  if (dy == g.out) return Status::Ok();
  return InvalidArgument(Str(op) + ": gradient " + dy.ToString() + " does not match the forward output " +
                         g.out.ToString());
}

}  // namespace lockstep
