// Internal to runtime/onnx/: how the window ops' translators (onnx_window_ops.cc,
// onnx_conv3d_ops.cc) read a node's window (kernel, strides, dilations, pads, auto_pad) and move
// ONNX's NCHW images to Lockstep's NHWC window ops and back.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {

// How a convolution or pool is padded, in the terms of Lockstep's NHWC window ops: SAME or
// VALID, after an explicit Pad node where ONNX's pads are neither (or where SAME's would
// average differently).
struct Padding {
  std::string mode;           // "SAME" or "VALID"
  std::vector<int64_t> pads;  // non-empty: pad the NC... input by these (Pad's begins, then ends)
  // Non-empty where the padding depends on an image size unknown at load: WindowPads' attrs,
  // which compute the pads from the image's shape on every run (mode is then VALID).
  AttrMap run_time;

  bool at_run_time() const { return !run_time.values().empty(); }
};

// The geometry of one window op as read from the node, over its spatial dimensions: two for a
// 2-D op and for a 1-D one ([N, C, L], read as [N, C, 1, L]), three for a 3-D one.
struct Window {
  bool one_d = false;
  std::vector<int64_t> image;    // -1 where unknown
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;

  size_t dims() const { return image.size(); }
  // The window's extent, its taps spread by the dilations.
  int64_t extent(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }
};

// The most groups a convolution may have (far above any model's channels), so that a filter's
// channels times the groups cannot overflow.
inline constexpr int64_t kMaxGroups = int64_t{1} << 24;

// "[1,2,3]", for messages.
std::string Ints(const std::vector<int64_t>& v);
bool AllOnes(const std::vector<int64_t>& v);
// A constant int64 vector.
std::string IntsConstant(OnnxNodeContext& ctx, std::vector<int64_t> values, std::string_view suffix);

// The window of the node over input 0 (rank 3 to 2 + max_spatial), `kernel` unless the node's
// kernel_shape says. Window attributes are bounded before ONNX's shape inference sees them
// (onnx_checks.cc), so extents and products of them cannot overflow.
StatusOr<Window> ReadWindow(const OnnxNodeContext& ctx, std::vector<int64_t> kernel, int max_spatial);
// The window of a convolution: its kernel is the filter's spatial dimensions (input 1, whose
// shape must be known), which kernel_shape may repeat but not contradict.
StatusOr<Window> ReadFilterWindow(const OnnxNodeContext& ctx, int max_spatial = 2);
// The node's `pads` attribute, [begins..., ends...] over the window's dimensions (zeros when
// absent).
StatusOr<std::vector<int64_t>> ReadPads(const OnnxNodeContext& ctx, const Window& w);
// ONNX's pads, auto_pad and (for pools) ceil_mode as Lockstep padding. `same_allowed`: whether
// padding equal to SAME's may run as SAME (not for an average that counts the padding, nor for
// a window op that is not one NHWC op).
StatusOr<Padding> ReadPadding(const OnnxNodeContext& ctx, const Window& w, bool same_allowed, bool ceil_mode);

// Input 0 (NC... , or NCL as NC1L) padded as `padding` says.
std::string Padded(OnnxNodeContext& ctx, const Window& w, const Padding& padding, double pad_value);
// Input 0 padded, then moved to NHWC.
std::string ToNhwc(OnnxNodeContext& ctx, const Window& w, const Padding& padding, double pad_value);
// y (NHWC) back to NCHW, or to NCL for a 1-D op.
std::string FromNhwc(OnnxNodeContext& ctx, const Window& w, const std::string& y);

// `v` reshaped to `dims` when they are known (`known`), else to the int64 vector `run_time`
// makes from the shapes of the run (a window op's image known only then).
std::string ReshapedTo(OnnxNodeContext& ctx, const std::string& v, bool known, std::vector<int64_t> dims,
                       const std::function<std::string()>& run_time, const std::string& tag);
// Dimensions [start, end) of `v`'s shape on each run, and int64 vectors joined end to end: the
// parts of such a run-time shape.
std::string DimsOf(OnnxNodeContext& ctx, const std::string& v, int64_t start, int64_t end, const std::string& tag);
std::string Joined(OnnxNodeContext& ctx, std::vector<std::string> parts, const std::string& tag);

}  // namespace lockstep::onnx_import
