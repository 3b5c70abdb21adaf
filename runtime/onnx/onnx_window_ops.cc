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
#include "runtime/onnx/onnx_window.h"

namespace lockstep::onnx_import {
namespace {

AttrMap PoolAttrs(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> dilations,
                  const std::string& padding) {
  AttrMap attrs{{"ksize", kernel}, {"strides", strides}, {"padding", padding}};
  if (!AllOnes(dilations)) attrs.Set("dilations", dilations);
  return attrs;
}

// A 3-D pool of x (NCDHW, padded, VALID) as a 2-D pool over (H, W) of every depth slice, then
// one over (D, 1) of the [N, D, H' * W', C] result. Where a size is known only at run time, the
// reshapes between take it from the shapes of the run.
StatusOr<std::string> Pool3D(OnnxNodeContext& ctx, const Window& w, const Padding& padding, const char* op,
                             double pad_value) {
  const Shape& shape = ctx.InputSpec(0)->shape;
  std::vector<int64_t> padded(3), out(3);
  const int64_t channels = shape.dim(1);
  bool known = channels >= 0 && !padding.at_run_time();
  for (size_t d = 0; d < 3; ++d) {
    known = known && w.image[d] >= 0;
    padded[d] = w.image[d] + (padding.pads.empty() ? 0 : padding.pads[2 + d] + padding.pads[7 + d]);
    if (w.image[d] >= 0 && padded[d] < w.extent(d)) return ctx.Error("the window is larger than the padded input " + Ints(padded));
    out[d] = (padded[d] - w.extent(d)) / w.strides[d] + 1;
  }
  const std::string x = Padded(ctx, w, padding, pad_value);
  const std::string ndhwc = ctx.Emit("Transpose", {x}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 3, 4, 1}}}, "ndhwc");
  const std::string slices = ReshapedTo(ctx, ndhwc, known, {-1, padded[1], padded[2], channels}, [&] {
    return Joined(ctx, {IntsConstant(ctx, {-1}, "slices_lead"), DimsOf(ctx, ndhwc, 2, 5, "slices_hwc")}, "slices_shape");
  }, "slices");
  const std::string hw = ctx.Emit(op, {slices},
                                  PoolAttrs({w.kernel[1], w.kernel[2]}, {w.strides[1], w.strides[2]},
                                            {w.dilations[1], w.dilations[2]}, "VALID"),
                                  "pool_hw");
  const std::string columns = ReshapedTo(ctx, hw, known, {-1, padded[0], out[1] * out[2], channels}, [&] {
    return Joined(ctx, {DimsOf(ctx, ndhwc, 0, 2, "columns_nd"), IntsConstant(ctx, {-1}, "columns_hw"), DimsOf(ctx, hw, 3, 4, "columns_c")},
                  "columns_shape");
  }, "columns");
  const std::string dhw = ctx.Emit(op, {columns},
                                   PoolAttrs({w.kernel[0], 1}, {w.strides[0], 1}, {w.dilations[0], 1}, "VALID"),
                                   "pool_d");
  const std::string volume = ReshapedTo(ctx, dhw, known, {-1, out[0], out[1], out[2], channels}, [&] {
    return Joined(ctx, {DimsOf(ctx, dhw, 0, 2, "volume_nd"), DimsOf(ctx, hw, 1, 4, "volume_hwc")}, "volume_shape");
  }, "volume");
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
  if (!kMax && include_pad == 0 && (!padding.pads.empty() || padding.at_run_time())) {
    const TensorSpec& x = *ctx.InputSpec(0);
    if (x.dtype != DType::kFloat32) return ctx.Unsupported("pads left out of a " + std::string(DTypeName(x.dtype)) + " average");
    Shape mask_shape{1, 1};
    for (int d = 2; d < x.shape.rank(); ++d) mask_shape.AddDim(x.shape.dim(d));
    std::string mask;
    if (mask_shape.IsFullyDefined()) {
      mask = ctx.EmitConstant(
          Tensor::FromVector<float>(mask_shape, std::vector<float>(static_cast<size_t>(mask_shape.num_elements()), 1.0f)),
          "image_mask");
    } else {
      // Ones of the image's size, made per run from its shape.
      const std::string image = ctx.Emit("Shape", {ctx.input(0)}, AttrMap{{"start", int64_t{2}}}, "image_size");
      const std::string shape =
          ctx.Emit("Concat", {IntsConstant(ctx, {1, 1}, "mask_lead"), image}, AttrMap{{"axis", int64_t{0}}}, "mask_shape");
      mask = ctx.Emit("ConstantOfShape", {shape}, AttrMap{{"dtype", DType::kFloat32}, {"value", 1.0}}, "image_mask");
    }
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
// A filter computed at run time (a graph input, a dequantized weight), spread by nodes. `f` is
// [M, C, KH, KW] of a known shape.
StatusOr<std::string> SpreadFilterAtRunTime(OnnxNodeContext& ctx, const Window& w, std::string f) {
  std::vector<int64_t> dims(ctx.InputSpec(1)->shape.dims().begin(), ctx.InputSpec(1)->shape.dims().end());
  if (w.one_d) dims.insert(dims.begin() + 2, 1);
  for (int axis = 2; axis < 4; ++axis) {
    const int64_t d = w.dilations[static_cast<size_t>(axis - 2)];
    if (d > 1) f = InsertZeros(ctx, f, dims, axis, d - 1, "filter_dilated_" + std::to_string(axis));
  }
  return f;
}

StatusOr<std::string> SpreadFilter(OnnxNodeContext& ctx, const Window& w) {
  std::string f = ctx.input(1);
  if (w.one_d) f = ctx.Emit("ExpandDims", {f}, AttrMap{{"axis", int64_t{2}}}, "filter_2d");
  if (AllOnes(w.dilations)) return f;
  const Tensor* constant = ctx.ConstantInput(1);
  if (constant == nullptr) return SpreadFilterAtRunTime(ctx, w, f);
  const Shape& fs = constant->shape();
  const Tensor filter = w.one_d ? constant->Reshaped(Shape{fs.dim(0), fs.dim(1), 1, fs.dim(2)}) : *constant;
  StatusOr<Tensor> spread = DilateFilter(filter, 2, w.dilations[0], w.dilations[1]);
  if (!spread.ok()) return ctx.Unsupported(spread.status().message());
  return ctx.EmitConstant(std::move(*spread), "filter_dilated");
}

// The pool and where each maximum lies (MaxPoolWithIndices, NCHW): for graphs that unpool.
Status MaxPoolWithIndices(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx, {}, 3));
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, false, false));
  if (padding.at_run_time()) {
    return ctx.UnknownUntilRunTime("SAME padding of a MaxPool with Indices over an image whose size is unknown until run time");
  }
  LS_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.IntAttr("ceil_mode", 0));
  LS_ASSIGN_OR_RETURN(int64_t storage_order, ctx.IntAttr("storage_order", 0));
  // Back from the window's 2-D reading of a 1-D pool; pads from Pad's form (N, C, spatial...).
  const size_t n = w.dims(), first = w.one_d ? 1 : 0;
  std::vector<int64_t> begins, ends;
  for (size_t d = first; d < n; ++d) {
    begins.push_back(padding.pads.empty() ? 0 : padding.pads[2 + d]);
    ends.push_back(padding.pads.empty() ? 0 : padding.pads[n + 4 + d]);
  }
  begins.insert(begins.end(), ends.begin(), ends.end());
  const auto spatial = [&](const std::vector<int64_t>& v) { return std::vector<int64_t>(v.begin() + first, v.end()); };
  const std::string node =
      ctx.Emit("MaxPoolWithIndices", {ctx.input(0)},
               AttrMap{{"kernel_shape", spatial(w.kernel)}, {"strides", spatial(w.strides)},
                       {"dilations", spatial(w.dilations)}, {"pads", begins}, {"ceil_mode", ceil_mode != 0},
                       {"storage_order", storage_order}});
  outputs->push_back(node);
  outputs->push_back(node + ":1");
  return Status::Ok();
}

}  // namespace

// The pooling kernels run on floats; a max of 8- or 16-bit integers is exact in float32, so
// those pool as float32 and come back.
Status MaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const auto& spec = ctx.InputSpec(0);
  const bool narrow = spec && (spec->dtype == DType::kUInt8 || spec->dtype == DType::kInt8 ||
                               spec->dtype == DType::kUInt16 || spec->dtype == DType::kInt16);
  const bool with_indices = ctx.node().output_size() > 1 && !ctx.node().output(1).empty();
  if (with_indices && narrow) return ctx.Unsupported("the Indices output of an integer MaxPool");
  if (with_indices) return MaxPoolWithIndices(ctx, outputs);
  if (!narrow) return Pool<true>(ctx, outputs);
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
  const int64_t channels = known_channels >= 0 || group < 1 || group > kMaxGroups ? known_channels : fs.dim(1) * group;
  const int64_t m = fs.dim(0);
  if (group < 1 || group > kMaxGroups || channels < 0 || channels % group != 0 || m % group != 0 ||
      fs.dim(1) != channels / group) {
    return ctx.Error("group " + std::to_string(group) + " does not fit " + std::to_string(channels) +
                     " input channels and the filter " + fs.ToString());
  }
  const bool depthwise = group > 1 && group == channels;
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, true, false));
  // A convolution that is one op pads as it reads (EXPLICIT); groups slice a padded image.
  AttrMap attrs{{"strides", w.strides}, {"padding", padding.mode}};
  if (!padding.pads.empty() && (group == 1 || depthwise)) {
    const std::vector<int64_t>& p = padding.pads;  // Pad's form over N, C, H, W: begins, then ends
    attrs.Set("padding", std::string("EXPLICIT"));
    attrs.Set("explicit_paddings", std::vector<int64_t>{0, 0, p[2], p[6], p[3], p[7], 0, 0});
    padding = Padding{"VALID", {}, {}};
  }
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
  if (ctx.InputSpec(0) && ctx.InputSpec(0)->shape.rank() == 5) return ConvTranspose3D(ctx, outputs);
  LS_ASSIGN_OR_RETURN(Window w, ReadFilterWindow(ctx));
  const Shape& fs = ctx.InputSpec(1)->shape;
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  if (group != 1) return ctx.Unsupported("group " + std::to_string(group) + " (only 1)");
  const int64_t channels = ctx.InputSpec(0)->shape.dim(1);
  if (channels >= 0 && channels != fs.dim(0)) {
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
      if (output_shape && in < 0) {
        return ctx.UnknownUntilRunTime("output_shape of an image whose size is unknown until run time");
      }
      // Negative when the asked-for size is larger than the full one: then the halves are
      // rounded down, as ONNX's reference does (Python's //), and zeros fill the difference.
      // SAME asks for in * stride, which leaves the same total whatever the image's size.
      const int64_t total = output_shape ? w.strides[d] * (in - 1) + extra[d] + w.extent(d) - (*output_shape)[d]
                                         : extra[d] + w.extent(d) - w.strides[d];
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
  const std::string x = ToNhwc(ctx, w, Padding{"VALID", {}, {}}, 0.0);
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
  // in * stride + (kernel - pads - stride) along each spatial axis: constant where the input's
  // size is known, else from its shape on every run.
  std::vector<int64_t> out_spatial, offsets;
  bool known = true;
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t in = x.dim(static_cast<int>(d + 2));
    offsets.push_back((*kernel)[d] - pads[d] - pads[spatial + d] - strides[d]);
    out_spatial.push_back(in * strides[d] + offsets.back());
    known = known && in >= 0;
  }
  const std::string spatial_sizes =
      known ? IntsConstant(ctx, out_spatial, "spatial")
            : ctx.Emit("Add",
                       {ctx.Emit("Mul",
                                 {ctx.Emit("Shape", {ctx.input(0)}, AttrMap{{"start", int64_t{2}}}, "image"),
                                  IntsConstant(ctx, strides, "strides")},
                                 {}, "strided"),
                        IntsConstant(ctx, offsets, "offsets")},
                       {}, "spatial");
  const std::string batch_channels = ctx.Emit("Shape", {ctx.input(0)}, AttrMap{{"end", int64_t{2}}}, "batch_channels");
  const std::string shape =
      ctx.Emit("Concat", {batch_channels, spatial_sizes}, AttrMap{{"axis", int64_t{0}}}, "unpooled_shape");
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
