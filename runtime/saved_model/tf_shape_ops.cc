// The translators of the ops TensorFlow graphs compute shapes with (Shape -> StridedSlice ->
// Pack -> Reshape, as Keras's Flatten exports it), padding, and batch normalisation at
// inference (Keras's BatchNormalization after a convolution).
#include <limits>

#include "runtime/import/batch_norm.h"
#include "runtime/import/constants.h"
#include "runtime/saved_model/tf_translators.h"

namespace lockstep::tf_import {
namespace {

Status CheckInputs(const TranslationContext& ctx, size_t n) {
  if (ctx.inputs().size() != n) return ctx.Error("expects " + std::to_string(n) + " inputs");
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ConstantInts(const TranslationContext& ctx, size_t i, const std::string& what) {
  if (std::optional<std::vector<int64_t>> values = IntValues(ctx.ConstantInput(i))) return *values;
  return ctx.Error(what + " must be a constant int32 or int64 tensor (computed at run time here)");
}

std::string Int64Vector(TranslationContext& ctx, const std::vector<int64_t>& values, std::string_view suffix) {
  return ctx.EmitConstant(Tensor::FromVector<int64_t>(lockstep::Shape{static_cast<int64_t>(values.size())}, values), suffix);
}

}  // namespace

// Shape(input; out_type int32 or int64): read at run time, or folded when the input's shape is
// known (the session's constant folding).
Status Shape(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 1));
  DType out = DType::kInt32;
  if (ctx.node().attr().count("out_type") != 0) {
    LS_ASSIGN_OR_RETURN(out, ctx.TypeAttr("out_type"));
  }
  if (out != DType::kInt32 && out != DType::kInt64) return ctx.Error("out_type must be int32 or int64");
  const bool last = out == DType::kInt64;
  const std::string dims = ctx.Emit("Shape", {ctx.inputs()[0]}, {}, last ? "" : "int64");
  outputs->push_back(last ? dims : ctx.Emit("Cast", {dims}, AttrMap{{"dtype", DType::kInt32}}));
  return Status::Ok();
}

// StridedSlice(input, begin, end, strides) with constant begin, end and strides: one Slice of
// the dimensions the spec names, then the shrunk ones squeezed out. begin_mask and end_mask
// take a dimension from its start or to its end; ellipsis and new axes are not supported.
Status StridedSlice(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 4));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> begin, ConstantInts(ctx, 1, "begin"));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> end, ConstantInts(ctx, 2, "end"));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ConstantInts(ctx, 3, "strides"));
  LS_ASSIGN_OR_RETURN(int64_t begin_mask, ctx.IntAttr("begin_mask", 0));
  LS_ASSIGN_OR_RETURN(int64_t end_mask, ctx.IntAttr("end_mask", 0));
  LS_ASSIGN_OR_RETURN(int64_t ellipsis_mask, ctx.IntAttr("ellipsis_mask", 0));
  LS_ASSIGN_OR_RETURN(int64_t new_axis_mask, ctx.IntAttr("new_axis_mask", 0));
  LS_ASSIGN_OR_RETURN(int64_t shrink_mask, ctx.IntAttr("shrink_axis_mask", 0));
  if (ellipsis_mask != 0 || new_axis_mask != 0) return ctx.Error("ellipsis_mask and new_axis_mask are not supported");
  const size_t n = begin.size();
  if (end.size() != n || strides.size() != n) return ctx.Error("begin, end and strides differ in length");
  if (n == 0 || n > 8) return ctx.Error("begin must name 1 to 8 dimensions, got " + std::to_string(n));
  constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max(), kToStart = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> starts(n), ends(n), axes(n), steps(n), squeezed;
  for (size_t i = 0; i < n; ++i) {
    const int64_t bit = int64_t{1} << i;
    axes[i] = static_cast<int64_t>(i);
    if (strides[i] == 0) return ctx.Error("a stride is 0");
    if ((shrink_mask & bit) != 0) {
      // One element: [begin, begin + 1), where begin -1 means the last.
      if (begin[i] == std::numeric_limits<int64_t>::max()) return ctx.Error("begin is out of range");
      starts[i] = begin[i];
      ends[i] = begin[i] == -1 ? kToEnd : begin[i] + 1;
      steps[i] = 1;
      squeezed.push_back(static_cast<int64_t>(i));
      continue;
    }
    // Walking backwards from before the start is empty in TensorFlow but clamps to the first
    // element in the runtime's (ONNX's) Slice; the dimension is not known here, so a begin
    // that might be out of range is refused rather than answered differently.
    if (strides[i] < 0 && (begin_mask & bit) == 0 && begin[i] < -1) {
      return ctx.Error("a negative stride from begin " + std::to_string(begin[i]) + " is not supported");
    }
    steps[i] = strides[i];
    starts[i] = (begin_mask & bit) != 0 ? (strides[i] > 0 ? 0 : kToEnd) : begin[i];
    ends[i] = (end_mask & bit) != 0 ? (strides[i] > 0 ? kToEnd : kToStart) : end[i];
  }
  const bool last = squeezed.empty();
  const std::string sliced = ctx.Emit("Slice",
                                      {ctx.inputs()[0], Int64Vector(ctx, starts, "starts"), Int64Vector(ctx, ends, "ends"),
                                       Int64Vector(ctx, axes, "axes"), Int64Vector(ctx, steps, "steps")},
                                      {}, last ? "" : "slice");
  outputs->push_back(last ? sliced : ctx.Emit("Squeeze", {sliced}, AttrMap{{"axes", squeezed}}));
  return Status::Ok();
}

// Pack(values...; axis): each value given a dimension of 1 at `axis`, then concatenated there.
Status Pack(TranslationContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.inputs().empty()) return ctx.Error("needs at least one value");
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  std::vector<std::string> expanded;
  for (size_t i = 0; i < ctx.inputs().size(); ++i) {
    expanded.push_back(ctx.Emit("ExpandDims", {ctx.inputs()[i]}, AttrMap{{"axis", axis}}, "value_" + std::to_string(i)));
  }
  // ExpandDims and Concat both count a negative axis in the packed rank, as Pack does.
  outputs->push_back(ctx.Emit("Concat", std::move(expanded), AttrMap{{"axis", axis}}));
  return Status::Ok();
}

// Fill(dims, value) with a constant value.
Status Fill(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  const Tensor* value = ctx.ConstantInput(1);
  if (value == nullptr) return ctx.Error("the value must be a constant");
  LS_ASSIGN_OR_RETURN(double v, ScalarValue(*value));
  outputs->push_back(ctx.Emit("ConstantOfShape", {ctx.inputs()[0]}, AttrMap{{"dtype", value->dtype()}, {"value", v}}));
  return Status::Ok();
}

// Pad / PadV2 / MirrorPad(input, paddings [rank, 2] constant[, constant_values]).
Status Pad(TranslationContext& ctx, std::vector<std::string>* outputs) {
  const bool mirror = ctx.node().op() == "MirrorPad";
  const bool v2 = ctx.node().op() == "PadV2";
  LS_RETURN_IF_ERROR(CheckInputs(ctx, v2 ? 3 : 2));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> paddings, ConstantInts(ctx, 1, "paddings"));
  const Tensor* p = ctx.ConstantInput(1);
  if (p->shape().rank() != 2 || p->shape().dim(1) != 2) return ctx.Error("paddings must be [rank, 2]");
  // TensorFlow's [[before, after], ...] to the runtime's [befores..., afters...].
  const size_t rank = paddings.size() / 2;
  std::vector<int64_t> pads(2 * rank);
  for (size_t d = 0; d < rank; ++d) {
    pads[d] = paddings[2 * d];
    pads[rank + d] = paddings[2 * d + 1];
  }
  AttrMap attrs{{"mode", std::string("constant")}};
  if (mirror) {
    LS_ASSIGN_OR_RETURN(std::string mode, ctx.StringAttr("mode", ""));
    if (mode != "REFLECT") return ctx.Error("mode '" + mode + "' is not supported (only REFLECT)");
    attrs.Set("mode", std::string("reflect"));
  }
  if (v2) {
    const Tensor* value = ctx.ConstantInput(2);
    if (value == nullptr) return ctx.Error("constant_values must be a constant");
    LS_ASSIGN_OR_RETURN(double v, ScalarValue(*value));
    attrs.Set("value", v);
  }
  outputs->push_back(ctx.Emit("Pad", {ctx.inputs()[0], Int64Vector(ctx, pads, "pads")}, std::move(attrs)));
  return Status::Ok();
}

Status AddN(TranslationContext& ctx, std::vector<std::string>* outputs) {
  const auto& in = ctx.inputs();
  if (in.empty()) return ctx.Error("needs at least one input");
  std::string acc = in[0];
  for (size_t i = 1; i < in.size(); ++i) acc = ctx.Emit("Add", {acc, in[i]}, {}, i + 1 == in.size() ? "" : "sum_" + std::to_string(i));
  outputs->push_back(in.size() == 1 ? ctx.Emit("Identity", {acc}, {}) : acc);
  return Status::Ok();
}

Status Square(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 1));
  outputs->push_back(ctx.Emit("Mul", {ctx.inputs()[0], ctx.inputs()[0]}, {}));
  return Status::Ok();
}

Status Rsqrt(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 1));
  outputs->push_back(ctx.Emit("Reciprocal", {ctx.Emit("Sqrt", {ctx.inputs()[0]}, {}, "sqrt")}, {}));
  return Status::Ok();
}

Status Transpose(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ConstantInts(ctx, 1, "perm"));
  outputs->push_back(ctx.Emit("Transpose", {ctx.inputs()[0]}, AttrMap{{"perm", std::move(perm)}}));
  return Status::Ok();
}

// FusedBatchNorm / V2 / V3 at inference (is_training false, NHWC): one multiply and one add
// per channel, folded at import (runtime/import/batch_norm.h). Only output y is computed.
Status FusedBatchNorm(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 5));
  LS_ASSIGN_OR_RETURN(bool training, ctx.BoolAttr("is_training", true));
  if (training) return ctx.Error("is_training must be false (only inference)");
  LS_ASSIGN_OR_RETURN(std::string format, ctx.StringAttr("data_format", "NHWC"));
  if (format != "NHWC") return ctx.Error("data_format " + format + " is not supported (only NHWC)");
  float epsilon = 1e-4f;
  if (auto it = ctx.node().attr().find("epsilon"); it != ctx.node().attr().end()) epsilon = it->second.f();
  for (size_t i = 1; i <= 4; ++i) {
    if (ctx.ConstantInput(i) == nullptr) return ctx.Error("scale, offset, mean and variance must be constants");
  }
  DType dtype = DType::kFloat32;
  if (ctx.node().attr().count("T") != 0) {
    LS_ASSIGN_OR_RETURN(dtype, ctx.TypeAttr("T"));
  }
  const Tensor& scale = *ctx.ConstantInput(1);
  StatusOr<FoldedBatchNorm> folded =
      FoldBatchNorm(scale, *ctx.ConstantInput(2), *ctx.ConstantInput(3), *ctx.ConstantInput(4), epsilon, dtype,
                    lockstep::Shape{scale.num_elements()});
  if (!folded.ok()) return ctx.Error(folded.status().message());
  const std::string s = ctx.EmitConstant(std::move(folded->scale), "scale");
  const std::string scaled = ctx.Emit("Mul", {ctx.inputs()[0], s}, {}, "scaled");
  const std::string offset = ctx.EmitConstant(std::move(folded->offset), "offset");
  outputs->push_back(ctx.Emit("Add", {scaled, offset}, {}));
  return Status::Ok();
}

}  // namespace lockstep::tf_import
