// The translators of ONNX's sliding-window ops: Conv, ConvTranspose and the pools. ONNX images
// are NCHW and Lockstep's window ops NHWC: each such node becomes Transpose -> op -> Transpose,
// with a constant filter transposed once, by constant folding. A 1-D op ([N, C, L]) runs as a
// 2-D one of height 1; a 3-D pool runs as two 2-D pools, one over (H, W) and one over D (a
// window's maximum or average is that of its rows' maxima or averages, the rows being equal in
// size once the padding is explicit).
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/import/dilated_filter.h"
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {
namespace {

const std::vector<int64_t> kToNhwc{0, 2, 3, 1};
const std::vector<int64_t> kToNchw{0, 3, 1, 2};

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

// How a convolution or pool is padded, in the terms of Lockstep's NHWC window ops: SAME or
// VALID, after an explicit Pad node where ONNX's pads are neither (or where SAME's would
// average differently).
struct Padding {
  std::string mode;           // "SAME" or "VALID"
  std::vector<int64_t> pads;  // non-empty: pad the NC... input by these (Pad's begins, then ends)
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
  const size_t n = w.dims();
  std::vector<int64_t> pads(2 * n, 0);  // begins, then ends
  auto same_pads = [&](bool lower) -> Status {
    for (size_t d = 0; d < n; ++d) {
      const int64_t in = w.image[d];
      if (in < 0) return ctx.Unsupported("explicit SAME padding of an image whose size is unknown until run time");
      const int64_t out = (in + w.strides[d] - 1) / w.strides[d];
      const int64_t total = std::max<int64_t>((out - 1) * w.strides[d] + w.extent(d) - in, 0);
      pads[d] = lower ? total - total / 2 : total / 2;
      pads[n + d] = total - pads[d];
    }
    return Status::Ok();
  };
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (auto_pad == "SAME_UPPER" && same_allowed && !ceil_mode) return Padding{"SAME", {}};
    LS_RETURN_IF_ERROR(same_pads(auto_pad == "SAME_LOWER"));
  } else if (auto_pad == "NOTSET") {
    LS_ASSIGN_OR_RETURN(pads, ReadPads(ctx, w));
  } else if (auto_pad != "VALID") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  for (int64_t p : pads) {
    if (p < 0) return ctx.Error("pads must not be negative, got " + Ints(pads));
  }
  if (ceil_mode) {
    // The last window may start inside the image and run past its end: pad the end so that it
    // fits (what it covers there is never the maximum).
    for (size_t d = 0; d < n; ++d) {
      const int64_t in = w.image[d];
      if (in < 0) return ctx.Unsupported("ceil_mode for an image whose size is unknown until run time");
      const int64_t span = in + pads[d] + pads[n + d] - w.extent(d);
      if (span < 0) continue;
      const int64_t out = (span + w.strides[d] - 1) / w.strides[d] + 1;
      pads[n + d] += std::max<int64_t>((out - 1) * w.strides[d] + w.extent(d) - (in + pads[d] + pads[n + d]), 0);
    }
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return Padding{"VALID", {}};
  if (same_allowed) {
    const std::vector<int64_t> given = pads;
    if (same_pads(false).ok() && pads == given) return Padding{"SAME", {}};
    pads = given;
  }
  // Pad's form: every axis's begin, then every axis's end; N and C are not padded.
  std::vector<int64_t> all(2 * (n + 2), 0);
  for (size_t d = 0; d < n; ++d) {
    all[2 + d] = pads[d];
    all[n + 4 + d] = pads[n + d];
  }
  return Padding{"VALID", std::move(all)};
}

// x (NC... , or NCL as NC1L) padded as `padding` says.
std::string Padded(OnnxNodeContext& ctx, const Window& w, const Padding& padding, double pad_value) {
  std::string x = ctx.input(0);
  if (w.one_d) x = ctx.Emit("ExpandDims", {x}, AttrMap{{"axis", int64_t{2}}}, "as_2d");
  if (padding.pads.empty()) return x;
  const std::string pads = IntsConstant(ctx, padding.pads, "pads");
  return ctx.Emit("Pad", {x, pads}, AttrMap{{"mode", std::string("constant")}, {"value", pad_value}}, "pad");
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

AttrMap PoolAttrs(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> dilations,
                  const std::string& padding) {
  AttrMap attrs{{"ksize", kernel}, {"strides", strides}, {"padding", padding}};
  if (!AllOnes(dilations)) attrs.Set("dilations", dilations);
  return attrs;
}

// A 3-D pool of x (NCDHW, padded, VALID) as a 2-D pool over (H, W) of every depth slice, then
// one over (D, 1) of the [N, D, H' * W', C] result.
StatusOr<std::string> Pool3D(OnnxNodeContext& ctx, const Window& w, const Padding& padding, const char* op,
                             double pad_value) {
  const Shape& shape = ctx.InputSpec(0)->shape;
  std::vector<int64_t> padded(3), out(3);
  const int64_t channels = shape.dim(1);
  for (size_t d = 0; d < 3; ++d) {
    if (w.image[d] < 0 || channels < 0) return ctx.Unsupported("a 3-D window over dimensions unknown until run time");
    padded[d] = w.image[d] + (padding.pads.empty() ? 0 : padding.pads[2 + d] + padding.pads[7 + d]);
    if (padded[d] < w.extent(d)) return ctx.Error("the window is larger than the padded input " + Ints(padded));
    out[d] = (padded[d] - w.extent(d)) / w.strides[d] + 1;
  }
  const std::string x = Padded(ctx, w, padding, pad_value);
  const std::string ndhwc = ctx.Emit("Transpose", {x}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 3, 4, 1}}}, "ndhwc");
  const std::string slices =
      ctx.Emit("Reshape", {ndhwc}, AttrMap{{"shape", std::vector<int64_t>{-1, padded[1], padded[2], channels}}}, "slices");
  const std::string hw = ctx.Emit(op, {slices},
                                  PoolAttrs({w.kernel[1], w.kernel[2]}, {w.strides[1], w.strides[2]},
                                            {w.dilations[1], w.dilations[2]}, "VALID"),
                                  "pool_hw");
  const std::string columns = ctx.Emit(
      "Reshape", {hw}, AttrMap{{"shape", std::vector<int64_t>{-1, padded[0], out[1] * out[2], channels}}}, "columns");
  const std::string dhw = ctx.Emit(op, {columns},
                                   PoolAttrs({w.kernel[0], 1}, {w.strides[0], 1}, {w.dilations[0], 1}, "VALID"),
                                   "pool_d");
  const std::string volume =
      ctx.Emit("Reshape", {dhw}, AttrMap{{"shape", std::vector<int64_t>{-1, out[0], out[1], out[2], channels}}}, "volume");
  return ctx.Emit("Transpose", {volume}, AttrMap{{"perm", std::vector<int64_t>{0, 4, 1, 2, 3}}});
}

// The pool of input 0, padded as `padding` says with `pad_value`.
StatusOr<std::string> PoolOf(OnnxNodeContext& ctx, const Window& w, const Padding& padding, const char* op,
                             double pad_value) {
  if (w.dims() == 3) return Pool3D(ctx, w, padding, op, pad_value);
  const std::string x = ToNhwc(ctx, w, padding, pad_value);
  const std::string y = ctx.Emit(op, {x}, PoolAttrs(w.kernel, w.strides, w.dilations, padding.mode), "pool");
  return FromNhwc(ctx, w, y);
}

template <bool kMax>
Status Pool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, {}, 3));
  LS_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.IntAttr("ceil_mode", 0));
  LS_ASSIGN_OR_RETURN(int64_t include_pad, ctx.IntAttr("count_include_pad", 0));
  // The padding ceil_mode adds at the end is never counted: with count_include_pad, the given
  // padding would be counted and that not, which one mask cannot say.
  if (!kMax && ceil_mode != 0 && include_pad != 0) return ctx.Unsupported("ceil_mode 1 for an average that counts the pads");
  const bool three_d = w.dims() == 3;
  // An average that counts the padding pads explicitly with zeros; one that does not may run
  // as SAME (Lockstep's average leaves SAME's padding out), or else as the average of the
  // zero-padded input over that of a mask of ones (the image's share of each window).
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, !three_d && (kMax || include_pad == 0), ceil_mode != 0));
  const double pad_value = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
  const char* op = kMax ? "MaxPool2D" : "AvgPool2D";
  LS_ASSIGN_OR_RETURN(std::string y, PoolOf(ctx, w, padding, op, pad_value));
  if (!kMax && include_pad == 0 && !padding.pads.empty()) {
    const TensorSpec& x = *ctx.InputSpec(0);
    Shape mask_shape{1, 1};
    for (int d = 2; d < x.shape.rank(); ++d) {
      if (x.shape.dim(d) < 0) return ctx.Unsupported("pads left out of the average of an image whose size is unknown until run time");
      mask_shape.AddDim(x.shape.dim(d));
    }
    if (x.dtype != DType::kFloat32) return ctx.Unsupported("pads left out of a " + std::string(DTypeName(x.dtype)) + " average");
    const std::string mask = ctx.EmitConstant(
        Tensor::FromVector<float>(mask_shape, std::vector<float>(static_cast<size_t>(mask_shape.num_elements()), 1.0f)),
        "image_mask");
    OnnxNodeContext counting = ctx.WithInputs({mask}, {TensorSpec{x.dtype, mask_shape}}, "count");
    LS_ASSIGN_OR_RETURN(std::string share, PoolOf(counting, w, padding, op, 0.0));
    y = ctx.Emit("Div", {y, share}, {}, "");
  }
  outputs->push_back(y);
  return Status::Ok();
}

template <const char* kReduce>
Status GlobalPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 3) return ctx.Error("input must have rank >= 3");
  std::vector<int64_t> axes;
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  outputs->push_back(ctx.Emit(kReduce, {ctx.input(0)}, AttrMap{{"axes", axes}, {"keep_dims", true}}));
  return Status::Ok();
}
constexpr char kMean[] = "Mean";
constexpr char kMax[] = "Max";

// The filter (input 1) with rank 4 (a 1-D one given a height of 1) and, where dilated, spread
// (runtime/import/dilated_filter.h): so a dilated filter must be a constant.
StatusOr<std::string> SpreadFilter(OnnxNodeContext& ctx, const Window& w) {
  std::string f = ctx.input(1);
  if (w.one_d) f = ctx.Emit("ExpandDims", {f}, AttrMap{{"axis", int64_t{2}}}, "filter_2d");
  if (AllOnes(w.dilations)) return f;
  const Tensor* constant = ctx.ConstantInput(1);
  if (constant == nullptr) return ctx.Unsupported("dilations " + Ints(w.dilations) + " of a filter that is not a constant");
  const Shape& fs = constant->shape();
  const Tensor filter = w.one_d ? constant->Reshaped(Shape{fs.dim(0), fs.dim(1), 1, fs.dim(2)}) : *constant;
  StatusOr<Tensor> spread = DilateFilter(filter, 2, w.dilations[0], w.dilations[1]);
  if (!spread.ok()) return ctx.Unsupported(spread.status().message());
  return ctx.EmitConstant(std::move(*spread), "filter_dilated");
}

// The window of a convolution: its kernel is the filter's spatial dimensions (input 1, whose
// shape must be known), which kernel_shape may repeat but not contradict.
StatusOr<Window> ReadFilterWindow(const OnnxNodeContext& ctx, int max_spatial = 2) {
  const auto& w_spec = ctx.InputSpec(1);
  if (!w_spec || !w_spec->shape.IsFullyDefined()) return ctx.Unsupported("a filter whose shape is unknown until run time");
  const Shape& fs = w_spec->shape;
  if (fs.rank() < 3) return ctx.Error("the filter must have rank 3 or 4, got " + fs.ToString());
  const std::vector<int64_t> kernel(fs.dims().begin() + 2, fs.dims().end());
  LS_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, kernel, max_spatial));
  if ((w.one_d ? std::vector<int64_t>{w.kernel[1]} : w.kernel) != kernel) {
    return ctx.Error("kernel_shape does not match the filter " + fs.ToString());
  }
  return w;
}

// A 2-D Conv node of `node`'s group, with `w`'s (H, W) strides and dilations, unpadded.
onnx::NodeProto PlaneConvNode(const onnx::NodeProto& node, const Window& w, int64_t group) {
  onnx::NodeProto plane;
  plane.set_op_type("Conv");
  plane.set_name(node.name());
  auto ints = [&](const char* name, std::vector<int64_t> values) {
    onnx::AttributeProto* a = plane.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  };
  ints("kernel_shape", {w.kernel[1], w.kernel[2]});
  ints("strides", {w.strides[1], w.strides[2]});
  ints("dilations", {w.dilations[1], w.dilations[2]});
  onnx::AttributeProto* g = plane.add_attribute();
  g->set_name("group");
  g->set_type(onnx::AttributeProto::INT);
  g->set_i(group);
  return plane;
}

// A 3-D convolution as a sum of 2-D ones, one per depth tap k of the filter: output depth o
// reads input depth o * stride + k * dilation, so the input's depth slices for tap k, batched
// as [N * D', C, H, W], convolve over (H, W) with the filter's slice k (the 2-D translator
// doing groups, dilations and strides), and the taps' results add up.
Status Conv3D(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(Window w, ReadFilterWindow(ctx, 3));
  const Shape& fs = ctx.InputSpec(1)->shape;
  const int64_t channels = ctx.InputSpec(0)->shape.dim(1), m = fs.dim(0);
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  if (group < 1 || channels < 0 || channels % group != 0 || fs.dim(1) * group != channels) {
    return ctx.Error("group " + std::to_string(group) + " does not fit " + std::to_string(channels) +
                     " input channels and the filter " + fs.ToString());
  }
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, false, false));
  std::vector<int64_t> padded(3), out(3);
  for (size_t d = 0; d < 3; ++d) {
    if (w.image[d] < 0) return ctx.Unsupported("a 3-D convolution of an image whose size is unknown until run time");
    padded[d] = w.image[d] + (padding.pads.empty() ? 0 : padding.pads[2 + d] + padding.pads[7 + d]);
    if (padded[d] < w.extent(d)) return ctx.Error("the filter is larger than the padded input " + Ints(padded));
    out[d] = (padded[d] - w.extent(d)) / w.strides[d] + 1;
  }
  const std::string x = Padded(ctx, w, padding, 0.0);
  const onnx::NodeProto plane = PlaneConvNode(ctx.node(), w, group);
  const DType dtype = ctx.InputSpec(0)->dtype;
  std::string sum;
  for (int64_t k = 0; k < w.kernel[0]; ++k) {
    const std::string tag = "tap_" + std::to_string(k);
    std::vector<int64_t> depths(static_cast<size_t>(out[0]));
    for (int64_t o = 0; o < out[0]; ++o) depths[static_cast<size_t>(o)] = o * w.strides[0] + k * w.dilations[0];
    const std::string slices = ctx.Emit("Gather", {x, IntsConstant(ctx, std::move(depths), tag + "/depths")},
                                        AttrMap{{"axis", int64_t{2}}}, tag + "/slices");
    const std::string batched = ctx.Emit(
        "Reshape",
        {ctx.Emit("Transpose", {slices}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}}, tag + "/depth_major")},
        AttrMap{{"shape", std::vector<int64_t>{-1, channels, padded[1], padded[2]}}}, tag + "/planes");
    const std::string filter = ctx.Emit("Gather", {ctx.input(1), ctx.EmitConstant(Tensor::Scalar<int64_t>(k), tag + "/k")},
                                        AttrMap{{"axis", int64_t{2}}}, tag + "/filter");
    OnnxNodeContext as_2d =
        ctx.WithNode(plane, {batched, filter},
                     {TensorSpec{dtype, Shape{-1, channels, padded[1], padded[2]}},
                      TensorSpec{dtype, Shape{m, fs.dim(1), fs.dim(3), fs.dim(4)}}},
                     tag);
    std::vector<std::string> y;
    LS_RETURN_IF_ERROR(Conv(as_2d, &y));
    sum = sum.empty() ? y.at(0) : ctx.Emit("Add", {sum, y.at(0)}, {}, tag + "/sum");
  }
  const std::string volume =
      ctx.Emit("Reshape", {sum}, AttrMap{{"shape", std::vector<int64_t>{-1, out[0], m, out[1], out[2]}}}, "volume");
  std::string y = ctx.Emit("Transpose", {volume}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}},
                           ctx.HasInput(2) ? "ncdhw" : "");
  if (ctx.HasInput(2)) {
    const std::string bias =
        ctx.Emit("Reshape", {ctx.input(2)}, AttrMap{{"shape", std::vector<int64_t>{1, m, 1, 1, 1}}}, "bias_5d");
    y = ctx.Emit("Add", {y, bias});
  }
  outputs->push_back(y);
  return Status::Ok();
}

}  // namespace

// The pooling kernels run on floats; a max of 8- or 16-bit integers is exact in float32, so
// those pool as float32 and come back.
Status MaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const auto& spec = ctx.InputSpec(0);
  const bool narrow = spec && (spec->dtype == DType::kUInt8 || spec->dtype == DType::kInt8 ||
                               spec->dtype == DType::kUInt16 || spec->dtype == DType::kInt16);
  if (!narrow) return Pool<true>(ctx, outputs);
  if (ctx.node().output_size() > 1) return ctx.Unsupported("the Indices output of an integer MaxPool");
  const std::string wide = ctx.Emit("Cast", {ctx.input(0)}, AttrMap{{"dtype", DType::kFloat32}}, "f32");
  OnnxNodeContext as_float = ctx.WithInputs({wide}, {TensorSpec{DType::kFloat32, spec->shape}}, "f32_pool");
  std::vector<std::string> pooled;
  LS_RETURN_IF_ERROR(Pool<true>(as_float, &pooled));
  outputs->push_back(ctx.Emit("Cast", {pooled.at(0)}, AttrMap{{"dtype", spec->dtype}}));
  return Status::Ok();
}
Status AveragePool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return Pool<false>(ctx, outputs); }
Status GlobalAveragePool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  return GlobalPool<kMean>(ctx, outputs);
}
Status GlobalMaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) { return GlobalPool<kMax>(ctx, outputs); }

// The filter [M, C/g, (KH,) KW] goes to [KH, KW, C, M] for Conv2D (g = 1), or [KH, KW, C, M/C]
// for DepthwiseConv2D (g = C: output channel c * M/C + j reads input channel c).
Status Conv(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.InputSpec(0) && ctx.InputSpec(0)->shape.rank() == 5) return Conv3D(ctx, outputs);
  LS_ASSIGN_OR_RETURN(Window w, ReadFilterWindow(ctx));
  const Shape& fs = ctx.InputSpec(1)->shape;
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  // The input's channels, or where they are known only at run time (a channel shuffle's
  // computed Reshape), what the filter says they are; the kernels check them on every run.
  const int64_t known_channels = ctx.InputSpec(0)->shape.dim(1);
  const int64_t channels = known_channels >= 0 || group < 1 ? known_channels : fs.dim(1) * group;
  const int64_t m = fs.dim(0);
  if (group < 1 || channels < 0 || channels % group != 0 || m % group != 0 || fs.dim(1) != channels / group) {
    return ctx.Error("group " + std::to_string(group) + " does not fit " + std::to_string(channels) +
                     " input channels and the filter " + fs.ToString());
  }
  const bool depthwise = group > 1 && group == channels;
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, true, false));
  const std::string x = ToNhwc(ctx, w, padding, 0.0);
  // Conv2D reads a dilated filter's taps where they lie; DepthwiseConv2D takes it spread out
  // (its taps are few: a 5x5 of dilation 2 spreads to 9x9).
  std::string f = ctx.input(1);
  if (depthwise) {
    LS_ASSIGN_OR_RETURN(f, SpreadFilter(ctx, w));
  } else if (w.one_d) {
    f = ctx.Emit("ExpandDims", {f}, AttrMap{{"axis", int64_t{2}}}, "filter_2d");
  }
  f = ctx.Emit("Transpose", {f}, AttrMap{{"perm", std::vector<int64_t>{2, 3, 1, 0}}}, "filter_hwio");
  AttrMap attrs{{"strides", w.strides}, {"padding", padding.mode}};
  if (!depthwise && !AllOnes(w.dilations)) attrs.Set("dilations", w.dilations);
  std::string y;
  if (group == 1) {
    y = ctx.Emit("Conv2D", {x, f}, std::move(attrs), "conv");
  } else if (depthwise) {
    f = ctx.Emit("Reshape", {f}, AttrMap{{"shape", std::vector<int64_t>{w.extent(0), w.extent(1), channels, m / channels}}},
                 "filter_depthwise");
    y = ctx.Emit("DepthwiseConv2D", {x, f}, std::move(attrs), "conv");
  } else {
    // Groups: each a convolution of its slice of the input channels with its slice of the
    // filters, side by side along the channels.
    const int64_t cin = channels / group, cout = m / group;
    const std::string axis = IntsConstant(ctx, {3}, "channel_axis");
    std::vector<std::string> parts;
    for (int64_t g = 0; g < group; ++g) {
      const std::string tag = "group_" + std::to_string(g);
      auto slice = [&](const std::string& v, int64_t begin, int64_t size, const char* what) {
        const std::string b = IntsConstant(ctx, {begin}, tag + "/" + what + "_begin");
        const std::string e = IntsConstant(ctx, {begin + size}, tag + "/" + what + "_end");
        return ctx.Emit("Slice", {v, b, e, axis}, {}, tag + "/" + what);
      };
      const std::string xg = slice(x, g * cin, cin, "input");
      const std::string fg = slice(f, g * cout, cout, "filter");
      parts.push_back(ctx.Emit("Conv2D", {xg, fg}, attrs, tag + "/conv"));
    }
    y = ctx.Emit("Concat", std::move(parts), AttrMap{{"axis", int64_t{3}}}, "conv");
  }
  if (ctx.HasInput(2)) y = ctx.Emit("BiasAdd", {y, ctx.input(2)}, {}, "bias");
  outputs->push_back(FromNhwc(ctx, w, y));
  return Status::Ok();
}

// Conv2DTranspose gives the full output, (in - 1) * stride + extent along each dimension;
// ONNX's output is that with pads[begin] cut from its start and pads[end] - output_padding
// from its end (zeros added where that is negative), then the bias. The filter [C, M, KH, KW]
// goes to [KH, KW, M, C].
Status ConvTranspose(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(Window w, ReadFilterWindow(ctx));
  const Shape& fs = ctx.InputSpec(1)->shape;
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  if (group != 1) return ctx.Unsupported("group " + std::to_string(group) + " (only 1)");
  if (ctx.InputSpec(0)->shape.dim(1) != fs.dim(0)) {
    return ctx.Error("the input's channels do not match the filter " + fs.ToString());
  }
  auto lifted = [&](const char* name) -> StatusOr<std::optional<std::vector<int64_t>>> {
    LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, ctx.IntsAttr(name));
    if (!v) return v;
    if (v->size() != (w.one_d ? 1u : 2u)) return ctx.Error(std::string(name) + " " + Ints(*v) + " does not fit the input's rank");
    if (w.one_d) v->insert(v->begin(), 0);
    return v;
  };
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_padding, lifted("output_padding"));
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_shape, lifted("output_shape"));
  if (output_shape && w.one_d) (*output_shape)[0] = 1;
  const std::vector<int64_t> extra = output_padding.value_or(std::vector<int64_t>{0, 0});
  for (size_t d = 0; d < 2; ++d) {
    if (extra[d] < 0 || extra[d] >= std::max(w.strides[d], w.dilations[d])) {
      return ctx.Error("output_padding " + Ints(extra) + " must be below the stride or the dilation");
    }
  }
  LS_ASSIGN_OR_RETURN(std::string auto_pad, ctx.StringAttr("auto_pad", "NOTSET"));
  std::vector<int64_t> pads(4, 0);  // [begin h, begin w, end h, end w]
  if (output_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The padding that gives the asked-for size (output_shape, or in * stride for SAME).
    for (size_t d = 0; d < 2; ++d) {
      const int64_t in = w.image[d];
      if (in < 0) return ctx.Unsupported("output_shape or SAME padding of an image whose size is unknown until run time");
      const int64_t want = output_shape ? (*output_shape)[d] : in * w.strides[d];
      // Negative when the asked-for size is larger than the full one: then the halves are
      // rounded down, as ONNX's reference does (Python's //), and zeros fill the difference.
      const int64_t total = w.strides[d] * (in - 1) + extra[d] + w.extent(d) - want;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      const bool upper = auto_pad == "SAME_UPPER";
      pads[d] = upper ? half : total - half;
      pads[2 + d] = total - pads[d];
    }
  } else if (auto_pad == "NOTSET") {
    LS_ASSIGN_OR_RETURN(pads, ReadPads(ctx, w));
    for (int64_t p : pads) {
      if (p < 0) return ctx.Error("pads must not be negative, got " + Ints(pads));
    }
  } else if (auto_pad != "VALID") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  const std::string x = ToNhwc(ctx, w, Padding{"VALID", {}}, 0.0);
  LS_ASSIGN_OR_RETURN(std::string f, SpreadFilter(ctx, w));
  f = ctx.Emit("Transpose", {f}, AttrMap{{"perm", std::vector<int64_t>{2, 3, 1, 0}}}, "filter_hwoi");
  std::string y = ctx.Emit("Conv2DTranspose", {x, f}, AttrMap{{"strides", w.strides}}, "deconv");
  // Zeros where the output reaches past the full one, then the crop.
  std::vector<int64_t> grow(8, 0), starts(2), ends(2);
  for (size_t d = 0; d < 2; ++d) {
    const int64_t cut_end = pads[2 + d] - extra[d];
    grow[1 + d] = std::max<int64_t>(-pads[d], 0);
    grow[5 + d] = std::max<int64_t>(-cut_end, 0);
    starts[d] = std::max<int64_t>(pads[d], 0);
    ends[d] = cut_end > 0 ? -cut_end : std::numeric_limits<int64_t>::max();
  }
  if (std::any_of(grow.begin(), grow.end(), [](int64_t v) { return v != 0; })) {
    y = ctx.Emit("Pad", {y, IntsConstant(ctx, grow, "grow")}, AttrMap{{"mode", std::string("constant")}}, "grown");
  }
  if (std::any_of(starts.begin(), starts.end(), [](int64_t v) { return v != 0; }) ||
      std::any_of(ends.begin(), ends.end(), [](int64_t v) { return v != std::numeric_limits<int64_t>::max(); })) {
    y = ctx.Emit("Slice", {y, IntsConstant(ctx, starts, "crop_starts"), IntsConstant(ctx, ends, "crop_ends"),
                           IntsConstant(ctx, {1, 2}, "crop_axes")},
                 {}, "cropped");
  }
  if (ctx.HasInput(2)) y = ctx.Emit("BiasAdd", {y, ctx.input(2)}, {}, "bias");
  outputs->push_back(FromNhwc(ctx, w, y));
  return Status::Ok();
}

// MaxUnpool(X, I[, output_shape]): zeros as large as the pool's input could have been,
// (in - 1) * stride - pads + kernel along each spatial axis, with each X written where its index
// I (a flat position in that whole tensor, as MaxPool's Indices give it) says: a scatter into
// the flattened zeros. A larger output_shape pads that at the end of each axis.
Status MaxUnpool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> kernel, ctx.IntsAttr("kernel_shape"));
  if (!kernel) return ctx.Error("needs kernel_shape");
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  const size_t spatial = kernel->size();
  if (static_cast<size_t>(rank) != spatial + 2) return ctx.Error("kernel_shape does not fit the input's rank");
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> s, ctx.IntsAttr("strides"));
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> p, ctx.IntsAttr("pads"));
  const std::vector<int64_t> strides = s ? *s : std::vector<int64_t>(spatial, 1);
  const std::vector<int64_t> pads = p ? *p : std::vector<int64_t>(2 * spatial, 0);
  if (strides.size() != spatial || pads.size() != 2 * spatial) return ctx.Error("strides or pads do not fit kernel_shape");
  const Shape& x = ctx.InputSpec(0)->shape;
  std::vector<int64_t> out_spatial;
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t in = x.dim(static_cast<int>(d + 2));
    if (in < 0) return ctx.Unsupported("an output size that depends on an input size unknown until run time");
    out_spatial.push_back((in - 1) * strides[d] - pads[d] - pads[spatial + d] + (*kernel)[d]);
  }
  const std::string batch_channels = ctx.Emit("Shape", {ctx.input(0)}, AttrMap{{"end", int64_t{2}}}, "batch_channels");
  const std::string shape = ctx.Emit("Concat", {batch_channels, IntsConstant(ctx, out_spatial, "spatial")},
                                     AttrMap{{"axis", int64_t{0}}}, "unpooled_shape");
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  const AttrMap flat{{"shape", std::vector<int64_t>{-1}}};
  const std::string zeros = ctx.Emit(
      "Reshape", {ctx.Emit("ConstantOfShape", {shape}, AttrMap{{"dtype", dtype}, {"value", 0.0}}, "zeros")}, flat, "zeros_flat");
  const std::string scattered =
      ctx.Emit("ScatterElements", {zeros, ctx.Emit("Reshape", {ctx.input(1)}, flat, "indices_flat"),
                                   ctx.Emit("Reshape", {ctx.input(0)}, flat, "values_flat")},
               AttrMap{{"axis", int64_t{0}}}, "scattered");
  if (!ctx.HasInput(2)) {
    outputs->push_back(ctx.Emit("Reshape", {scattered, shape}));
    return Status::Ok();
  }
  const std::string unpooled = ctx.Emit("Reshape", {scattered, shape}, {}, "unpooled");
  const std::string grow = ctx.Emit("Sub", {ctx.input(2), shape}, {}, "grow");
  const std::string begins = IntsConstant(ctx, std::vector<int64_t>(static_cast<size_t>(rank), 0), "no_begins");
  const std::string all_pads = ctx.Emit("Concat", {begins, grow}, AttrMap{{"axis", int64_t{0}}}, "pads");
  outputs->push_back(ctx.Emit("Pad", {unpooled, all_pads}, AttrMap{{"mode", std::string("constant")}}));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
