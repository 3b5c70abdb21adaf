// The 3-D convolutions ([N, C, D, H, W]), in terms of the 2-D ones. Conv: a sum of 2-D
// convolutions, one per depth tap (below). ConvTranspose: the convolution it is the gradient
// of: the input with stride - 1 zeros between its elements along each axis, padded by the
// filter's extent less one less the transposed pads (plus output_padding at the end), convolved
// (stride 1, the same dilations) with the filter flipped along every spatial axis and its
// channel axes swapped; group 1, as the 2-D translator. A convolution's image may be known only at
// run time; a transposed one's must be known when the model loads.
#include <limits>
#include <string>
#include <vector>

#include "runtime/onnx/onnx_translators.h"
#include "runtime/onnx/onnx_window.h"

namespace lockstep::onnx_import {
namespace {

void SetInts(onnx::NodeProto& node, const char* name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

StatusOr<std::vector<int64_t>> ThreeInts(const OnnxNodeContext& ctx, const char* name, int64_t fallback,
                                         size_t count = 3) {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, ctx.IntsAttr(name));
  if (!v) return std::vector<int64_t>(count, fallback);
  if (v->size() != count) return ctx.Error(std::string(name) + " does not have " + std::to_string(count) + " values");
  return *v;
}

// A 2-D Conv node of `node`'s group, with `w`'s (H, W) strides and dilations, unpadded.
onnx::NodeProto PlaneConvNode(const onnx::NodeProto& node, const Window& w, int64_t group) {
  onnx::NodeProto plane;
  plane.set_op_type("Conv");
  plane.set_name(node.name());
  SetInts(plane, "kernel_shape", {w.kernel[1], w.kernel[2]});
  SetInts(plane, "strides", {w.strides[1], w.strides[2]});
  SetInts(plane, "dilations", {w.dilations[1], w.dilations[2]});
  onnx::AttributeProto* g = plane.add_attribute();
  g->set_name("group");
  g->set_type(onnx::AttributeProto::INT);
  g->set_i(group);
  return plane;
}

}  // namespace

// A 3-D convolution as a sum of 2-D ones, one per depth tap k of the filter: output depth o
// reads input depth o * stride + k * dilation, so the input's depth slices for tap k, batched
// as [N * D', C, H, W], convolve over (H, W) with the filter's slice k (the 2-D translator
// doing groups, dilations and strides), and the taps' results add up.
Status Conv3D(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(Window w, ReadFilterWindow(ctx, 3));
  const Shape& fs = ctx.InputSpec(1)->shape;
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  // The input's channels, or where known only at run time what the filter says they are (the
  // 2-D convolutions check them on every run).
  const int64_t known_channels = ctx.InputSpec(0)->shape.dim(1), m = fs.dim(0);
  // group is bounded before it multiplies (a filter's channels times it cannot overflow).
  const int64_t channels = known_channels >= 0 || group < 1 || group > kMaxGroups ? known_channels : fs.dim(1) * group;
  if (group < 1 || group > kMaxGroups || channels < 0 || channels % group != 0 || fs.dim(1) * group != channels) {
    return ctx.Error("group " + std::to_string(group) + " does not fit " + std::to_string(channels) +
                     " input channels and the filter " + fs.ToString());
  }
  LS_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx, w, false, false));
  // Where the image's size is known only at run time, so are the depths each tap reads and the
  // planes' sizes: from the shapes of the run.
  std::vector<int64_t> padded(3, -1), out(3, -1);
  bool known = !padding.at_run_time();
  for (size_t d = 0; d < 3; ++d) {
    known = known && w.image[d] >= 0;
    if (w.image[d] < 0 || padding.at_run_time()) continue;
    padded[d] = w.image[d] + (padding.pads.empty() ? 0 : padding.pads[2 + d] + padding.pads[7 + d]);
    if (padded[d] < w.extent(d)) return ctx.Error("the filter is larger than the padded input " + Ints(padded));
    out[d] = (padded[d] - w.extent(d)) / w.strides[d] + 1;
  }
  if (!known && !padding.at_run_time()) {
    // Padded per run by WindowPads, which refuses a run whose padded image is smaller than the
    // filter (each tap's depths would otherwise be an empty range, and the answer empty).
    std::vector<int64_t> extents(3), given(6, 0);
    for (size_t d = 0; d < 3; ++d) {
      extents[d] = w.extent(d);
      if (!padding.pads.empty()) {
        given[d] = padding.pads[2 + d];
        given[3 + d] = padding.pads[7 + d];
      }
    }
    padding = Padding{"VALID", {},
                      AttrMap{{"extents", extents}, {"strides", w.strides}, {"pads", given},
                              {"auto_pad", std::string("NOTSET")}, {"ceil_mode", false}}};
  }
  const std::string x = Padded(ctx, w, padding, 0.0);
  std::string depth;  // the padded depth, a scalar, where known only at run time
  if (!known) {
    depth = ctx.Emit("Reshape", {DimsOf(ctx, x, 2, 3, "depth_dims")}, AttrMap{{"shape", std::vector<int64_t>{}}}, "depth");
  }
  const onnx::NodeProto plane = PlaneConvNode(ctx.node(), w, group);
  const DType dtype = ctx.InputSpec(0)->dtype;
  std::string sum;
  for (int64_t k = 0; k < w.kernel[0]; ++k) {
    const std::string tag = "tap_" + std::to_string(k);
    // Output depth o reads o * stride + k * dilation, for o below (depth - extent) / stride + 1.
    std::string depths;
    if (known) {
      std::vector<int64_t> at(static_cast<size_t>(out[0]));
      for (int64_t o = 0; o < out[0]; ++o) at[static_cast<size_t>(o)] = o * w.strides[0] + k * w.dilations[0];
      depths = IntsConstant(ctx, std::move(at), tag + "/depths");
    } else {
      const int64_t first = k * w.dilations[0];
      const std::string limit = ctx.Emit(
          "Add", {depth, ctx.EmitConstant(Tensor::Scalar<int64_t>(first - w.extent(0) + 1), tag + "/past")}, {}, tag + "/limit");
      depths = ctx.Emit("Range",
                        {ctx.EmitConstant(Tensor::Scalar<int64_t>(first), tag + "/first"), limit,
                         ctx.EmitConstant(Tensor::Scalar<int64_t>(w.strides[0]), tag + "/stride")},
                        {}, tag + "/depths");
    }
    const std::string slices = ctx.Emit("Gather", {x, depths}, AttrMap{{"axis", int64_t{2}}}, tag + "/slices");
    const std::string depth_major =
        ctx.Emit("Transpose", {slices}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}}, tag + "/depth_major");
    const std::string batched = ReshapedTo(ctx, depth_major, known, {-1, channels, padded[1], padded[2]}, [&] {
      return Joined(ctx, {IntsConstant(ctx, {-1}, tag + "/planes_lead"), DimsOf(ctx, depth_major, 2, 5, tag + "/planes_chw")},
                    tag + "/planes_shape");
    }, tag + "/planes");
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
  const std::string volume = ReshapedTo(ctx, sum, known, {-1, out[0], m, out[1], out[2]}, [&] {
    return Joined(ctx, {DimsOf(ctx, x, 0, 1, "volume_n"), IntsConstant(ctx, {-1}, "volume_d"), DimsOf(ctx, sum, 1, 4, "volume_mhw")},
                  "volume_shape");
  }, "volume");
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

Status ConvTranspose3D(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const auto& x_spec = ctx.InputSpec(0);
  const auto& f_spec = ctx.InputSpec(1);
  if (!f_spec || f_spec->shape.rank() != 5 || !f_spec->shape.IsFullyDefined()) {
    return ctx.UnknownUntilRunTime("a 3-D filter whose shape is unknown until run time");
  }
  LS_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  if (group != 1) return ctx.Unsupported("group " + std::to_string(group) + " (only 1)");
  const Shape& fs = f_spec->shape;  // [C, M, KD, KH, KW]
  const Shape& xs = x_spec->shape;
  if (xs.dim(1) >= 0 && xs.dim(1) != fs.dim(0)) {
    return ctx.Error("the input's channels do not match the filter " + fs.ToString());
  }
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ThreeInts(ctx, "strides", 1));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, ThreeInts(ctx, "dilations", 1));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> extra, ThreeInts(ctx, "output_padding", 0));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ThreeInts(ctx, "pads", 0, 6));
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_shape, ctx.IntsAttr("output_shape"));
  LS_ASSIGN_OR_RETURN(std::string auto_pad, ctx.StringAttr("auto_pad", "NOTSET"));
  if (output_shape && output_shape->size() != 3) return ctx.Error("output_shape does not have 3 values");
  for (int64_t v : output_shape.value_or(std::vector<int64_t>{})) {
    if (v < 1 || v > (int64_t{1} << 30)) return ctx.Error("output_shape " + std::to_string(v) + " is out of range");
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return ctx.Error("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  if (auto_pad == "VALID") pads.assign(6, 0);
  std::vector<int64_t> dims{-1, fs.dim(0), xs.dim(2), xs.dim(3), xs.dim(4)};  // the channels as the filter has them
  std::vector<int64_t> conv_pads(6);
  for (size_t d = 0; d < 3; ++d) {
    const int64_t in = dims[2 + d], k = fs.dim(static_cast<int>(2 + d));
    if (in < 0) return ctx.UnknownUntilRunTime("a 3-D transposed convolution of an image whose size is unknown until run time");
    if (strides[d] < 1 || dilations[d] < 1 || extra[d] < 0 || extra[d] >= std::max(strides[d], dilations[d])) {
      return ctx.Error("strides and dilations must be positive, and output_padding below the stride or the dilation");
    }
    const int64_t extent = (k - 1) * dilations[d] + 1;
    if (output_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The padding that gives the asked-for size, as the 2-D translator works it out.
      const int64_t want = output_shape ? (*output_shape)[d] : in * strides[d];
      const int64_t total = strides[d] * (in - 1) + extra[d] + extent - want;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[d] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[3 + d] = total - pads[d];
    } else if (pads[d] < 0 || pads[3 + d] < 0) {
      return ctx.Error("pads must not be negative");
    }
    conv_pads[d] = extent - 1 - pads[d];
    conv_pads[3 + d] = extent - 1 - pads[3 + d] + extra[d];
    if (conv_pads[d] < 0 || conv_pads[3 + d] < 0) {
      return ctx.Unsupported("pads larger than the filter's extent less one (they would crop the input)");
    }
  }
  std::string z = ctx.input(0);
  for (int axis = 2; axis < 5; ++axis) {
    const int64_t s = strides[static_cast<size_t>(axis - 2)];
    if (s > 1) z = InsertZeros(ctx, z, dims, axis, s - 1, "strided_" + std::to_string(axis));
  }
  const std::string flipped =
      ctx.Emit("Slice",
               {ctx.input(1), IntsConstant(ctx, {-1, -1, -1}, "flip_starts"),
                IntsConstant(ctx, std::vector<int64_t>(3, std::numeric_limits<int64_t>::min()), "flip_ends"),
                IntsConstant(ctx, {2, 3, 4}, "flip_axes"), IntsConstant(ctx, {-1, -1, -1}, "flip_steps")},
               {}, "filter_flipped");
  const std::string f = ctx.Emit("Transpose", {flipped}, AttrMap{{"perm", std::vector<int64_t>{1, 0, 2, 3, 4}}},
                                 "filter_as_conv");
  onnx::NodeProto conv;
  conv.set_op_type("Conv");
  conv.set_name(ctx.node().name());
  SetInts(conv, "kernel_shape", {fs.dim(2), fs.dim(3), fs.dim(4)});
  SetInts(conv, "dilations", dilations);
  SetInts(conv, "pads", conv_pads);
  std::vector<std::string> inputs{z, f};
  const DType dtype = x_spec->dtype;
  std::vector<std::optional<TensorSpec>> specs{
      TensorSpec{dtype, Shape{xs.dim(0), dims[1], dims[2], dims[3], dims[4]}},
      TensorSpec{dtype, Shape{fs.dim(1), fs.dim(0), fs.dim(2), fs.dim(3), fs.dim(4)}}};
  if (ctx.HasInput(2)) {
    inputs.push_back(ctx.input(2));
    specs.push_back(ctx.InputSpec(2));
  }
  OnnxNodeContext as_conv = ctx.WithNode(conv, std::move(inputs), std::move(specs), "as_conv");
  return Conv(as_conv, outputs);
}

}  // namespace lockstep::onnx_import
