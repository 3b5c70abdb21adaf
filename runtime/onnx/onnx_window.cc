#include "runtime/onnx/onnx_window.h"

#include <algorithm>

#include "runtime/window_pads.h"

namespace lockstep::onnx_import {
namespace {

const std::vector<int64_t> kToNhwc{0, 2, 3, 1};
const std::vector<int64_t> kToNchw{0, 3, 1, 2};

}  // namespace

std::string Ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool AllOnes(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
}

std::string IntsConstant(OnnxNodeContext& ctx, std::vector<int64_t> values, std::string_view suffix) {
  const int64_t n = static_cast<int64_t>(values.size());
  return ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{n}, std::move(values)), suffix);
}

// Window attributes are bounded before ONNX's shape inference sees them (onnx_model.cc), so
// extents and products of them here cannot overflow.
StatusOr<Window> ReadWindow(const OnnxNodeContext& ctx, std::vector<int64_t> kernel, int max_spatial) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 3 || rank > 2 + max_spatial) {
    return ctx.Unsupported("only " + std::string(max_spatial == 3 ? "1-D, 2-D and 3-D" : "1-D and 2-D") +
                           " windows are supported (input rank " + std::to_string(rank) + ")");
  }
  const size_t spatial = static_cast<size_t>(rank - 2);
  Window w;
  w.one_d = spatial == 1;
  const Shape& x = ctx.InputSpec(0)->shape;
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> k, ctx.IntsAttr("kernel_shape"));
  if (k) kernel = *k;
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> s, ctx.IntsAttr("strides"));
  std::vector<int64_t> strides = s ? *s : std::vector<int64_t>(kernel.size(), 1);
  if (kernel.size() != spatial || strides.size() != spatial) {
    return ctx.Error("kernel_shape " + Ints(kernel) + " and strides " + Ints(strides) + " do not fit the input's rank");
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> d, ctx.IntsAttr("dilations"));
  std::vector<int64_t> dilations = d ? *d : std::vector<int64_t>(spatial, 1);
  if (dilations.size() != spatial || std::any_of(dilations.begin(), dilations.end(), [](int64_t v) { return v < 1; })) {
    return ctx.Error("dilations " + Ints(dilations) + " do not fit the input's rank");
  }
  for (size_t i = 0; i < spatial; ++i) w.image.push_back(x.dim(static_cast<int>(2 + i)));
  auto lift = [&](std::vector<int64_t> v) { return w.one_d ? std::vector<int64_t>{1, v[0]} : v; };
  w.image = w.one_d ? std::vector<int64_t>{1, w.image[0]} : w.image;
  w.kernel = lift(kernel);
  w.strides = lift(strides);
  w.dilations = lift(dilations);
  return w;
}

// The node's `pads` attribute, [begins..., ends...] over the window's dimensions (zeros when
// absent).
StatusOr<std::vector<int64_t>> ReadPads(const OnnxNodeContext& ctx, const Window& w) {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> given, ctx.IntsAttr("pads"));
  if (!given) return std::vector<int64_t>(2 * w.dims(), 0);
  const size_t spatial = w.one_d ? 1 : w.dims();
  if (given->size() != 2 * spatial) return ctx.Error("pads " + Ints(*given) + " do not fit the input's rank");
  return w.one_d ? std::vector<int64_t>{0, (*given)[0], 0, (*given)[1]} : *given;
}

// ONNX's pads, auto_pad and (for pools) ceil_mode as Lockstep padding. `same_allowed`: whether
// padding equal to SAME's may run as SAME (not for an average that counts the padding, nor for
// a window op that is not one NHWC op).
StatusOr<Padding> ReadPadding(const OnnxNodeContext& ctx, const Window& w, bool same_allowed, bool ceil_mode) {
  LS_ASSIGN_OR_RETURN(std::string auto_pad, ctx.StringAttr("auto_pad", "NOTSET"));
  AutoPad mode = AutoPad::kNotSet;
  if (auto_pad == "SAME_UPPER") mode = AutoPad::kSameUpper;
  else if (auto_pad == "SAME_LOWER") mode = AutoPad::kSameLower;
  else if (auto_pad == "VALID") mode = AutoPad::kValid;
  else if (auto_pad != "NOTSET") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  if (mode == AutoPad::kSameUpper && same_allowed && !ceil_mode) return Padding{"SAME", {}, {}};
  const size_t n = w.dims();
  std::vector<int64_t> given(2 * n, 0);  // begins, then ends
  if (mode == AutoPad::kNotSet) {
    LS_ASSIGN_OR_RETURN(given, ReadPads(ctx, w));
  }
  for (int64_t p : given) {
    if (p < 0) return ctx.Error("pads must not be negative, got " + Ints(given));
  }
  const bool image_known = std::all_of(w.image.begin(), w.image.end(), [](int64_t in) { return in >= 0; });
  const bool needs_image = mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower || ceil_mode;
  if (needs_image && !image_known) {
    // The padding depends on the image's size: WindowPads computes it on every run.
    std::vector<int64_t> extents(n);
    for (size_t d = 0; d < n; ++d) extents[d] = w.extent(d);
    return Padding{"VALID", {},
                   AttrMap{{"extents", extents}, {"strides", w.strides}, {"pads", given}, {"auto_pad", auto_pad},
                           {"ceil_mode", ceil_mode}}};
  }
  std::vector<int64_t> pads(2 * n);
  for (size_t d = 0; d < n; ++d) {
    // An unknown image size is not read here (neither SAME nor ceil_mode).
    const AxisPads p = OnnxAxisPads(w.image[d], w.extent(d), w.strides[d], mode, AxisPads{given[d], given[n + d]}, ceil_mode);
    pads[d] = p.begin;
    pads[n + d] = p.end;
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return Padding{"VALID", {}, {}};
  if (same_allowed && image_known) {
    bool same = true;
    for (size_t d = 0; d < n; ++d) {
      const AxisPads p = OnnxAxisPads(w.image[d], w.extent(d), w.strides[d], AutoPad::kSameUpper, {}, false);
      same = same && p.begin == pads[d] && p.end == pads[n + d];
    }
    if (same) return Padding{"SAME", {}, {}};
  }
  // Pad's form: every axis's begin, then every axis's end; N and C are not padded.
  std::vector<int64_t> all(2 * (n + 2), 0);
  for (size_t d = 0; d < n; ++d) {
    all[2 + d] = pads[d];
    all[n + 4 + d] = pads[n + d];
  }
  return Padding{"VALID", std::move(all), {}};
}

// x (NC... , or NCL as NC1L) padded as `padding` says.
std::string Padded(OnnxNodeContext& ctx, const Window& w, const Padding& padding, double pad_value) {
  std::string x = ctx.input(0);
  if (w.one_d) x = ctx.Emit("ExpandDims", {x}, AttrMap{{"axis", int64_t{2}}}, "as_2d");
  const AttrMap pad_attrs{{"mode", std::string("constant")}, {"value", pad_value}};
  if (padding.at_run_time()) {
    const std::string shape = ctx.Emit("Shape", {x}, {}, "image_shape");
    const std::string pads = ctx.Emit("WindowPads", {shape}, padding.run_time, "pads");
    return ctx.Emit("Pad", {x, pads}, pad_attrs, "pad");
  }
  if (padding.pads.empty()) return x;
  const std::string pads = IntsConstant(ctx, padding.pads, "pads");
  return ctx.Emit("Pad", {x, pads}, pad_attrs, "pad");
}

// x padded, then moved to NHWC.
std::string ToNhwc(OnnxNodeContext& ctx, const Window& w, const Padding& padding, double pad_value) {
  return ctx.Emit("Transpose", {Padded(ctx, w, padding, pad_value)}, AttrMap{{"perm", kToNhwc}}, "nhwc");
}

// y (NHWC) back to NCHW, or to NCL for a 1-D op.
std::string FromNhwc(OnnxNodeContext& ctx, const Window& w, const std::string& y) {
  if (!w.one_d) return ctx.Emit("Transpose", {y}, AttrMap{{"perm", kToNchw}});
  const std::string nchw = ctx.Emit("Transpose", {y}, AttrMap{{"perm", kToNchw}}, "nchw");
  return ctx.Emit("Squeeze", {nchw}, AttrMap{{"axes", std::vector<int64_t>{2}}});
}

// The window of a convolution: its kernel is the filter's spatial dimensions (input 1, whose
// shape must be known), which kernel_shape may repeat but not contradict.
StatusOr<Window> ReadFilterWindow(const OnnxNodeContext& ctx, int max_spatial) {
  const auto& w_spec = ctx.InputSpec(1);
  if (!w_spec || !w_spec->shape.IsFullyDefined()) return ctx.UnknownUntilRunTime("a filter whose shape is unknown until run time");
  const Shape& fs = w_spec->shape;
  if (fs.rank() < 3) return ctx.Error("the filter must have rank 3 or 4, got " + fs.ToString());
  const std::vector<int64_t> kernel(fs.dims().begin() + 2, fs.dims().end());
  LS_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, kernel, max_spatial));
  if ((w.one_d ? std::vector<int64_t>{w.kernel[1]} : w.kernel) != kernel) {
    return ctx.Error("kernel_shape does not match the filter " + fs.ToString());
  }
  return w;
}

// A new axis of zeros after `axis`, merged into it.
std::string InsertZeros(OnnxNodeContext& ctx, std::string value, std::vector<int64_t>& dims, int axis, int64_t zeros,
                        const std::string& tag) {
  const size_t rank = dims.size(), at = static_cast<size_t>(axis);
  value = ctx.Emit("ExpandDims", {value}, AttrMap{{"axis", int64_t{axis + 1}}}, tag + "/expanded");
  std::vector<int64_t> pads(2 * (rank + 1), 0);  // Pad's form: begins, then ends
  pads[rank + 1 + at + 1] = zeros;
  value = ctx.Emit("Pad", {value, IntsConstant(ctx, pads, tag + "/zeros")}, AttrMap{{"mode", std::string("constant")}},
                   tag + "/padded");
  const int64_t n = dims[at];
  dims[at] = n * (zeros + 1);
  value = ctx.Emit("Reshape", {value}, AttrMap{{"shape", dims}}, tag + "/merged");
  dims[at] = (n - 1) * (zeros + 1) + 1;
  return ctx.Emit("Slice", {value, IntsConstant(ctx, {0}, tag + "/start"), IntsConstant(ctx, {dims[at]}, tag + "/end"),
                            IntsConstant(ctx, {axis}, tag + "/axis")},
                  {}, tag);
}

std::string ReshapedTo(OnnxNodeContext& ctx, const std::string& v, bool known, std::vector<int64_t> dims,
                       const std::function<std::string()>& run_time, const std::string& tag) {
  if (known) return ctx.Emit("Reshape", {v}, AttrMap{{"shape", std::move(dims)}}, tag);
  return ctx.Emit("Reshape", {v, run_time()}, {}, tag);
}

std::string DimsOf(OnnxNodeContext& ctx, const std::string& v, int64_t start, int64_t end, const std::string& tag) {
  return ctx.Emit("Shape", {v}, AttrMap{{"start", start}, {"end", end}}, tag);
}

std::string Joined(OnnxNodeContext& ctx, std::vector<std::string> parts, const std::string& tag) {
  return ctx.Emit("Concat", std::move(parts), AttrMap{{"axis", int64_t{0}}}, tag);
}

}  // namespace lockstep::onnx_import
