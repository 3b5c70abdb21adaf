// The translators of ONNX's normalisations beyond BatchNormalization and LayerNormalization
// (onnx_nn_ops.cc), each a few of Lockstep's reductions and element-wise ops: InstanceNormalization
// (also GroupNorm, which PyTorch exports as one over regrouped channels), GroupNormalization (the
// op of opsets 18 and 21), MeanVarianceNormalization, LpNormalization; and LRN, a kernel of its own.
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {
namespace {

// (x - mean) / sqrt(variance + epsilon) over `axes` (the reductions keep them as 1s).
std::string Standardize(OnnxNodeContext& ctx, const std::string& x, const std::vector<int64_t>& axes, DType dtype,
                        double epsilon) {
  const AttrMap over{{"axes", axes}, {"keep_dims", true}};
  const std::string centered = ctx.Emit("Sub", {x, ctx.Emit("Mean", {x}, over, "mean")}, {}, "centered");
  const std::string variance = ctx.Emit("Mean", {ctx.Emit("Mul", {centered, centered}, {}, "square")}, over, "variance");
  const std::string stddev =
      ctx.Emit("Sqrt", {ctx.Emit("Add", {variance, ctx.EmitConstant(Scalar(dtype, epsilon), "epsilon")}, {}, "shifted")},
               {}, "stddev");
  return ctx.Emit("Div", {centered, stddev}, {}, "normalized");
}

// [C] as [C, 1, ..., 1], to broadcast over the channels of a rank-`rank` NC... value.
std::string PerChannel(OnnxNodeContext& ctx, const std::string& v, int rank, std::string_view what) {
  std::vector<int64_t> shape{-1};
  for (int d = 2; d < rank; ++d) shape.push_back(1);
  return ctx.Emit("Reshape", {v}, AttrMap{{"shape", shape}}, what);
}

}  // namespace

// y = scale * (x - mean) / sqrt(variance + epsilon) + B, mean and variance over each sample's
// channel (the axes from 2 on).
Status InstanceNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 3) return ctx.Error("x must have rank 3 or more (N, C, and spatial dimensions)");
  LS_ASSIGN_OR_RETURN(float epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  const std::string normalized = Standardize(ctx, ctx.input(0), axes, dtype, epsilon);
  const std::string scaled = ctx.Emit("Mul", {normalized, PerChannel(ctx, ctx.input(1), rank, "scale")}, {}, "scaled");
  outputs->push_back(ctx.Emit("Add", {scaled, PerChannel(ctx, ctx.input(2), rank, "bias")}));
  return Status::Ok();
}

// (x - mean) / sqrt(variance) over `axes` (default [0, 2, 3]), with ONNX's epsilon of 1e-9.
Status MeanVarianceNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.IntsAttr("axes"));
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  const std::string y = Standardize(ctx, ctx.input(0), axes ? *axes : std::vector<int64_t>{0, 2, 3}, dtype, 1e-9);
  outputs->push_back(ctx.Emit("Identity", {y}));
  return Status::Ok();
}

// x over its L1 or L2 norm along `axis`.
Status LpNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", -1));
  LS_ASSIGN_OR_RETURN(int64_t p, ctx.IntAttr("p", 2));
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2, got " + std::to_string(p));
  const AttrMap over{{"axes", std::vector<int64_t>{axis}}, {"keep_dims", true}};
  const std::string x = ctx.input(0);
  const std::string norm = p == 1 ? ctx.Emit("Sum", {ctx.Emit("Abs", {x}, {}, "abs")}, over, "norm")
                                  : ctx.Emit("Sqrt", {ctx.Emit("Sum", {ctx.Emit("Mul", {x, x}, {}, "square")}, over, "sum")},
                                             {}, "norm");
  outputs->push_back(ctx.Emit("Div", {x, norm}));
  return Status::Ok();
}

Status Lrn(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  outputs->push_back(ctx.Emit("LRN", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

// GroupNormalization(X [N, C, ...], scale, bias; num_groups, epsilon): the channels in
// num_groups groups, each normalised over its channels and the image together (X as
// [N, groups, the rest], normalised along the last axis), then scaled and shifted: per group in
// opset 18 (scale and bias [groups], applied to the grouped rows), per channel from 21 ([C]).
Status GroupNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t groups, ctx.IntAttr("num_groups", 0));
  LS_ASSIGN_OR_RETURN(float epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (groups < 1) return ctx.Error("num_groups must be at least 1, got " + std::to_string(groups));
  if (rank < 2) return ctx.Error("the input must have rank 2 or more (N, C, ...)");
  const std::string batch = ctx.Emit("Shape", {ctx.input(0)}, AttrMap{{"end", int64_t{1}}}, "batch");
  const std::string grouping = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{2}, {groups, -1}), "grouping");
  const std::string grouped_shape = ctx.Emit("Concat", {batch, grouping}, AttrMap{{"axis", int64_t{0}}}, "grouped_shape");
  const std::string grouped = ctx.Emit("Reshape", {ctx.input(0), grouped_shape}, {}, "grouped");
  std::string y = ctx.Emit("LayerNormalize", {grouped}, AttrMap{{"epsilon", static_cast<double>(epsilon)}}, "normalize");
  const AttrMap per_group{{"shape", std::vector<int64_t>{groups, 1}}};
  if (ctx.opset() < 21) {
    y = ctx.Emit("Mul", {y, ctx.Emit("Reshape", {ctx.input(1)}, per_group, "group_scale")}, {}, "scaled");
    y = ctx.Emit("Add", {y, ctx.Emit("Reshape", {ctx.input(2)}, per_group, "group_bias")}, {}, "shifted");
  }
  y = ctx.Emit("Reshape", {y, ctx.Emit("Shape", {ctx.input(0)}, {}, "shape")}, {}, ctx.opset() < 21 ? "" : "ungrouped");
  if (ctx.opset() >= 21) {
    y = ctx.Emit("Mul", {y, PerChannel(ctx, ctx.input(1), rank, "channel_scale")}, {}, "scaled");
    y = ctx.Emit("Add", {y, PerChannel(ctx, ctx.input(2), rank, "channel_bias")});
  }
  outputs->push_back(y);
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
