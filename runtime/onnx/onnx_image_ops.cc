// The translators of ONNX's image ops: Resize (opsets 10 to 19), Upsample (7 to 9),
// GridSample, and the detection ops RoiAlign and NonMaxSuppression.
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {
namespace {

// Lockstep's Resize takes all of (x, scales, sizes, roi): an absent one is an empty constant.
std::string EmptyFloats(OnnxNodeContext& ctx, std::string_view what) {
  return ctx.EmitConstant(Tensor(DType::kFloat32, Shape{0}), what);
}

// The attributes every opset's Resize and Upsample share; `legacy` (Resize-10, Upsample):
// before opset 11 coordinates were asymmetric and nearest took the element at or before.
StatusOr<AttrMap> ResampleAttrs(const OnnxNodeContext& ctx, bool legacy) {
  LS_ASSIGN_OR_RETURN(std::string mode, ctx.StringAttr("mode", "nearest"));
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";  // Upsample-7's spellings
  if (mode != "nearest" && mode != "linear" && mode != "cubic") return ctx.Unsupported("mode '" + mode + "'");
  AttrMap attrs{{"mode", mode}};
  if (legacy) {
    attrs.Set("coordinate_transformation_mode", std::string("asymmetric"));
    attrs.Set("nearest_mode", std::string("floor"));
    return attrs;
  }
  LS_ASSIGN_OR_RETURN(std::string coordinates, ctx.StringAttr("coordinate_transformation_mode", "half_pixel"));
  LS_ASSIGN_OR_RETURN(std::string nearest, ctx.StringAttr("nearest_mode", "round_prefer_floor"));
  LS_ASSIGN_OR_RETURN(float a, ctx.FloatAttr("cubic_coeff_a", -0.75f));
  LS_ASSIGN_OR_RETURN(int64_t exclude, ctx.IntAttr("exclude_outside", 0));
  LS_ASSIGN_OR_RETURN(float extrapolation, ctx.FloatAttr("extrapolation_value", 0.0f));
  // Opset 18's additions (axes: Resize's own).
  LS_ASSIGN_OR_RETURN(int64_t antialias, ctx.IntAttr("antialias", 0));
  if (antialias != 0) return ctx.Unsupported("antialias 1 (a downscale's filter widened by the scale)");
  LS_ASSIGN_OR_RETURN(std::string policy, ctx.StringAttr("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch") return ctx.Unsupported("keep_aspect_ratio_policy '" + policy + "' (only 'stretch')");
  attrs.Set("coordinate_transformation_mode", coordinates);
  attrs.Set("nearest_mode", nearest);
  attrs.Set("cubic_coeff_a", static_cast<double>(a));
  attrs.Set("exclude_outside", exclude != 0);
  attrs.Set("extrapolation_value", static_cast<double>(extrapolation));
  return attrs;
}

// A value given for some axes only (Resize's scales or sizes under opset 18's `axes`) as one
// for every axis: `full` (every axis's default) with the given values put where the axes say.
std::string OverAxes(OnnxNodeContext& ctx, const std::string& full, const std::string& given, const std::string& axes,
                     std::string_view what) {
  return ctx.Emit("ScatterElements", {full, axes, given}, AttrMap{{"axis", int64_t{0}}}, what);
}

// Whether input i is given and not an empty constant (which exporters write for "absent").
bool Given(const OnnxNodeContext& ctx, size_t i) {
  if (!ctx.HasInput(i)) return false;
  const Tensor* value = ctx.ConstantInput(i);
  return value == nullptr || value->num_elements() > 0;
}

}  // namespace

Status Resize(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const bool legacy = ctx.opset() < 11;
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ResampleAttrs(ctx, legacy));
  // Opset 10: (x, scales). From 11: (x, roi, scales, sizes), roi and scales optional from 13.
  const size_t scales_input = legacy ? 1 : 2, sizes_input = 3, roi_input = 1;
  const std::string scales = ctx.HasInput(scales_input) ? ctx.input(scales_input) : EmptyFloats(ctx, "scales");
  const std::string sizes = !legacy && ctx.HasInput(sizes_input)
                                ? ctx.input(sizes_input)
                                : ctx.EmitConstant(Tensor(DType::kInt64, Shape{0}), "sizes");
  const std::string roi = !legacy && ctx.HasInput(roi_input) ? ctx.input(roi_input) : EmptyFloats(ctx, "roi");
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.IntsAttr("axes"));
  if (axes) {
    // Opset 18: scales or sizes for the axes named; the others keep their size.
    LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t& a : *axes) {
      if (a < -rank || a >= rank) return ctx.Error("axis " + std::to_string(a) + " is out of range");
      if (a < 0) a += rank;
      if (seen[static_cast<size_t>(a)]) return ctx.Error("axes repeat an axis");
      seen[static_cast<size_t>(a)] = true;
    }
    if (Given(ctx, roi_input)) return ctx.Unsupported("roi with axes");
    const std::string at = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(axes->size())}, *axes), "axes");
    std::string full_scales = scales, full_sizes = sizes;
    if (Given(ctx, scales_input)) {
      const std::string ones = ctx.EmitConstant(
          Tensor::FromVector<float>(Shape{rank}, std::vector<float>(static_cast<size_t>(rank), 1.0f)), "unscaled");
      full_scales = OverAxes(ctx, ones, scales, at, "scales_all_axes");
    }
    if (Given(ctx, sizes_input)) {
      full_sizes = OverAxes(ctx, ctx.Emit("Shape", {ctx.input(0)}, {}, "unresized"), sizes, at, "sizes_all_axes");
    }
    outputs->push_back(ctx.Emit("Resize", {ctx.input(0), full_scales, full_sizes, roi}, std::move(attrs)));
    return Status::Ok();
  }
  outputs->push_back(ctx.Emit("Resize", {ctx.input(0), scales, sizes, roi}, std::move(attrs)));
  return Status::Ok();
}

Status Upsample(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ResampleAttrs(ctx, true));
  std::string scales;
  if (ctx.opset() < 9) {
    // Opset 7: the scales are an attribute.
    std::vector<float> values;
    for (const onnx::AttributeProto& a : ctx.node().attribute()) {
      if (a.name() == "scales") values.assign(a.floats().begin(), a.floats().end());
    }
    if (values.empty()) return ctx.Error("needs the scales attribute");
    scales = ctx.EmitConstant(Tensor::FromVector<float>(Shape{static_cast<int64_t>(values.size())}, values), "scales");
  } else {
    if (!ctx.HasInput(1)) return ctx.Error("needs scales");
    scales = ctx.input(1);
  }
  const std::string sizes = ctx.EmitConstant(Tensor(DType::kInt64, Shape{0}), "sizes");
  outputs->push_back(ctx.Emit("Resize", {ctx.input(0), scales, sizes, EmptyFloats(ctx, "roi")}, std::move(attrs)));
  return Status::Ok();
}

Status GridSample(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  outputs->push_back(ctx.Emit("GridSample", {ctx.input(0), ctx.input(1)}, std::move(attrs)));
  return Status::Ok();
}

// Before opset 16 RoiAlign had no coordinate_transformation_mode and behaved as
// output_half_pixel; from 16 the default is half_pixel.
Status RoiAlign(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  if (ctx.opset() < 16) attrs.Set("coordinate_transformation_mode", std::string("output_half_pixel"));
  outputs->push_back(ctx.Emit("RoiAlign", {ctx.input(0), ctx.input(1), ctx.input(2)}, std::move(attrs)));
  return Status::Ok();
}

// NonMaxSuppression: its three optional scalars given as empty tensors when absent.
Status NonMaxSuppression(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  std::vector<std::string> inputs{ctx.input(0), ctx.input(1)};
  for (size_t i = 2; i < 5; ++i) inputs.push_back(ctx.HasInput(i) ? ctx.input(i) : EmptyFloats(ctx, "absent"));
  outputs->push_back(ctx.Emit("NonMaxSuppression", std::move(inputs), std::move(attrs)));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
