// The geometry of NHWC sliding-window ops (Conv2D, the pools and their gradients), shared so
// that a forward op and its gradient can never disagree about where a window lies. Internal
// to runtime/ops/. Padding follows TensorFlow:
//   VALID: out = (in - k) / s + 1, no padding (in < k is an error);
//   SAME:  out = ceil(in / s), pad_total = max((out - 1) * s + k - in, 0), of which
//          pad_total / 2 goes before (top/left) and the rest, one more when odd, after;
//   EXPLICIT (the convolutions only): attr "explicit_paddings", TensorFlow's 8 numbers in NHWC
//          order [0, 0, top, bottom, left, right, 0, 0]; out = (in + before + after - k) / s + 1.
//          What an ONNX convolution's `pads` say, without a Pad op copying the image first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
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

// How a window op pads: SAME, VALID, or explicit amounts before and after each spatial axis.
struct WindowPadding {
  bool same = false;
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // EXPLICIT's (0 for SAME and VALID)
};

// Attr "padding": "SAME" / "VALID" (default "VALID"; lower case accepted). True for SAME.
inline StatusOr<bool> ReadSamePadding(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view padding, attrs.GetStringViewOr("padding", "VALID"));
  if (padding == "SAME" || padding == "same") return true;
  if (padding == "VALID" || padding == "valid") return false;
  return InvalidArgument(Str(op) + ": attr 'padding' must be SAME or VALID, got '" + Str(padding) + "'");
}

// Attr "padding" of a convolution: SAME, VALID, or EXPLICIT with attr "explicit_paddings".
inline StatusOr<WindowPadding> ReadConvPadding(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view padding, attrs.GetStringViewOr("padding", "VALID"));
  if (padding != "EXPLICIT" && padding != "explicit") {
    LS_ASSIGN_OR_RETURN(bool same, ReadSamePadding(op, attrs));
    return WindowPadding{same};
  }
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> p, attrs.GetInts("explicit_paddings"));
  // A pad as large as 2^30 is no image's, and keeps every sum below far from overflow.
  constexpr int64_t kMaxPad = int64_t{1} << 30;
  const bool fits = p.size() == 8 && p[0] == 0 && p[1] == 0 && p[6] == 0 && p[7] == 0 &&
                    std::all_of(p.begin(), p.end(), [](int64_t v) { return v >= 0 && v <= kMaxPad; });
  if (!fits) {
    return InvalidArgument(Str(op) + ": attr 'explicit_paddings' must be 8 amounts in NHWC order, 0 <= each <= 2^30, "
                           "none on N and C");
  }
  return WindowPadding{false, p[2], p[3], p[4], p[5]};
}

inline StatusOr<Window> ComputeWindow(std::string_view op, std::string_view dim_name, int64_t in, int64_t k,
                                      int64_t stride, int64_t before, int64_t after) {
  if (in < 0 || k < 0) return Window{-1, before};
  if (in + before + after < k) {
    if (before + after == 0) {
      return InvalidArgument(Str(op) + ": window " + std::to_string(k) + " is larger than the input " +
                             Str(dim_name) + " " + std::to_string(in) + " with VALID padding");
    }
    return InvalidArgument(Str(op) + ": window " + std::to_string(k) + " is larger than the padded input " +
                           Str(dim_name) + " " + std::to_string(in + before + after));
  }
  return Window{(in + before + after - k) / stride + 1, before};
}

inline StatusOr<Window> ComputeWindow(std::string_view op, std::string_view dim_name, int64_t in, int64_t k,
                                      int64_t stride, bool same) {
  if (in < 0 || k < 0) return Window{-1, 0};
  if (same) {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t pad_total = std::max<int64_t>((out - 1) * stride + k - in, 0);
    return Window{out, pad_total / 2};
  }
  return ComputeWindow(op, dim_name, in, k, stride, 0, 0);
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
                                       std::pair<int64_t, int64_t> strides, const WindowPadding& padding, int64_t cout,
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
  if (padding.same) {
    LS_ASSIGN_OR_RETURN(g.wh, ComputeWindow(op, "height", g.h, extent_h, g.sh, true));
    LS_ASSIGN_OR_RETURN(g.ww, ComputeWindow(op, "width", g.w, extent_w, g.sw, true));
  } else {
    LS_ASSIGN_OR_RETURN(g.wh, ComputeWindow(op, "height", g.h, extent_h, g.sh, padding.top, padding.bottom));
    LS_ASSIGN_OR_RETURN(g.ww, ComputeWindow(op, "width", g.w, extent_w, g.sw, padding.left, padding.right));
  }
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
