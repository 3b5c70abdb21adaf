// The quantized-model ops, composed of float ones: QuantizeLinear, DequantizeLinear (per tensor,
// per axis, or per block along an axis as opset 21 has them; 4-bit values read as 8-bit ones),
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv. Right
// before fast: an integer product runs as a float64 product of the operands less their zero
// points (exact: every 8-bit product sum below 2^53), then requantizes as onnxruntime does, with
// the float32 multiplier a_scale * b_scale / y_scale, rounding half to even and saturating to
// the zero point's type. BitShift and BitwiseNot, on integers, are here too: the other integer
// ops.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "runtime/onnx/onnx_tensor.h"
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {
namespace {

std::string CastTo(OnnxNodeContext& ctx, const std::string& value, DType dtype, std::string_view suffix) {
  return ctx.Emit("Cast", {value}, AttrMap{{"dtype", dtype}}, suffix);
}

// A scale or zero point (input `i`) shaped to broadcast against a rank-`rank` value: a scalar
// as it is, a 1-D one along `axis`.
StatusOr<std::string> AlongAxis(OnnxNodeContext& ctx, const std::string& value, size_t i, int rank, int64_t axis,
                                std::string_view suffix) {
  LS_ASSIGN_OR_RETURN(int param_rank, ctx.InputRank(i));
  if (param_rank == 0) return value;
  if (param_rank != 1) return ctx.Error("input " + std::to_string(i) + " must be a scalar or 1-D");
  if (axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
  dims[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = -1;
  return ctx.Emit("Reshape", {value}, AttrMap{{"shape", std::move(dims)}}, suffix);
}

// A blocked scale or zero point (opset 21's block_size: one value for each `block` elements of x
// along `axis`, the parameter of x's rank) spread over x's elements: along the axis, element i
// takes the parameter's i / block.
std::string BlockSpread(OnnxNodeContext& ctx, const std::string& value, const std::string& x, int64_t axis, int64_t block,
                        const std::string& tag) {
  const std::string length = ctx.Emit(
      "Reshape", {ctx.Emit("Shape", {x}, AttrMap{{"start", axis}, {"end", axis + 1}}, tag + "/length_dims")},
      AttrMap{{"shape", std::vector<int64_t>{}}}, tag + "/length");
  const std::string positions = ctx.Emit("Range",
                                         {ctx.EmitConstant(Tensor::Scalar<int64_t>(0), tag + "/zero"), length,
                                          ctx.EmitConstant(Tensor::Scalar<int64_t>(1), tag + "/one")},
                                         {}, tag + "/positions");
  const std::string blocks =
      ctx.Emit("Div", {positions, ctx.EmitConstant(Tensor::Scalar<int64_t>(block), tag + "/block")}, {}, tag + "/blocks");
  return ctx.Emit("Gather", {value, blocks}, AttrMap{{"axis", axis}}, tag);
}

// A scale or zero point (input `i`) as it broadcasts against x (input 0, rank `rank`): spread
// over its blocks where the node has a block_size, else along `axis` (AlongAxis).
StatusOr<std::string> QuantParameter(OnnxNodeContext& ctx, const std::string& value, size_t i, int rank, int64_t axis,
                                     std::string_view suffix) {
  LS_ASSIGN_OR_RETURN(int64_t block, ctx.IntAttr("block_size", 0));
  if (block < 0) return ctx.Error("block_size " + std::to_string(block) + " is negative");
  if (block == 0) return AlongAxis(ctx, value, i, rank, axis, suffix);
  if (axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  LS_ASSIGN_OR_RETURN(int param_rank, ctx.InputRank(i));
  if (param_rank != rank) return ctx.Error("a blocked scale or zero point must have the input's rank");
  return BlockSpread(ctx, value, ctx.input(0), axis < 0 ? axis + rank : axis, block, std::string(suffix));
}

// The range of a quantized type, or an error.
StatusOr<std::pair<double, double>> QuantizedRange(const OnnxNodeContext& ctx, DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return std::pair<double, double>{0, 255};
    case DType::kInt8: return std::pair<double, double>{-128, 127};
    case DType::kUInt16: return std::pair<double, double>{0, 65535};
    case DType::kInt16: return std::pair<double, double>{-32768, 32767};
    default: return ctx.Unsupported("quantized type " + std::string(DTypeName(dtype)));
  }
}

// round(real) + zero point (input `zp`, or none), saturated to the zero point's type (uint8
// without one). `real` is float32 or float64; `rank` is its rank, `axis` the zero point's axis.
Status Requantize(OnnxNodeContext& ctx, std::string real, DType real_dtype, size_t zp, int rank, int64_t axis,
                  std::vector<std::string>* outputs) {
  DType out = DType::kUInt8;
  LS_ASSIGN_OR_RETURN(int64_t output_dtype, ctx.IntAttr("output_dtype", 0));  // opset 21, without a zero point
  if (ctx.HasInput(zp)) {
    LS_ASSIGN_OR_RETURN(out, InputDType(ctx, zp));
  } else if (output_dtype == kOnnxInt4 || output_dtype == kOnnxUInt4) {
    return ctx.Unsupported("a 4-bit output_dtype (4-bit values are read as weights, not computed)");
  } else if (output_dtype != 0) {
    StatusOr<DType> given = OnnxElemTypeToDType(static_cast<int32_t>(output_dtype));
    if (!given.ok()) return ctx.Unsupported(given.status().message());
    out = *given;
  }
  LS_ASSIGN_OR_RETURN(auto range, QuantizedRange(ctx, out));
  real = ctx.Emit("Round", {real}, {}, "round");
  if (ctx.HasInput(zp)) {
    LS_ASSIGN_OR_RETURN(std::string offset,
                        QuantParameter(ctx, CastTo(ctx, ctx.input(zp), real_dtype, "zero_point"), zp, rank, axis, "zp_axis"));
    real = ctx.Emit("Add", {real, offset}, {}, "shifted");
  }
  const std::string saturated = ctx.Emit("Clip", {real}, AttrMap{{"min", range.first}, {"max", range.second}}, "saturate");
  outputs->push_back(CastTo(ctx, saturated, out, ""));
  return Status::Ok();
}

// Input `x` less its zero point (input `zp`, or none) as float64, the zero point shaped by
// `shape_zp` (a 1-D zero point's broadcast shape, or empty for as it is).
std::string Centered(OnnxNodeContext& ctx, size_t x, size_t zp, std::vector<int64_t> shape_zp, std::string_view name) {
  const std::string wide = CastTo(ctx, ctx.input(x), DType::kFloat64, std::string(name) + "_f64");
  if (!ctx.HasInput(zp)) return wide;
  std::string offset = CastTo(ctx, ctx.input(zp), DType::kFloat64, std::string(name) + "_zp");
  if (!shape_zp.empty() && ctx.InputSpec(zp) && ctx.InputSpec(zp)->shape.rank() == 1) {
    offset = ctx.Emit("Reshape", {offset}, AttrMap{{"shape", std::move(shape_zp)}}, std::string(name) + "_zp_axis");
  }
  return ctx.Emit("Sub", {wide, offset}, {}, std::string(name) + "_centred");
}

TensorSpec AsFloat64(const TensorSpec& spec) { return {DType::kFloat64, spec.shape}; }

// Runs the float translator `translate` on `inputs` (float64, with specs) as this node.
StatusOr<std::string> RunAsFloat(OnnxNodeContext& ctx, OnnxTranslator translate, std::vector<std::string> inputs,
                                 std::vector<std::optional<TensorSpec>> specs) {
  OnnxNodeContext sub = ctx.WithInputs(std::move(inputs), std::move(specs), "f64");
  std::vector<std::string> outputs;
  LS_RETURN_IF_ERROR(translate(sub, &outputs));
  return outputs.at(0);
}

// float32 a_scale * b_scale / y_scale as float64, shaped for a rank-`rank` output whose
// per-row scale (a's, 1-D) lies on axis `a_axis` and per-column one (b's) on `b_axis`.
StatusOr<std::string> Multiplier(OnnxNodeContext& ctx, size_t a_scale, size_t b_scale, size_t y_scale, int rank,
                                 int64_t a_axis, int64_t b_axis) {
  LS_ASSIGN_OR_RETURN(std::string a, AlongAxis(ctx, ctx.input(a_scale), a_scale, rank, a_axis, "a_scale_axis"));
  LS_ASSIGN_OR_RETURN(std::string b, AlongAxis(ctx, ctx.input(b_scale), b_scale, rank, b_axis, "b_scale_axis"));
  const std::string ab = ctx.Emit("Mul", {a, b}, {}, "scale_ab");
  return CastTo(ctx, ctx.Emit("Div", {ab, ctx.input(y_scale)}, {}, "multiplier"), DType::kFloat64, "multiplier_f64");
}

// A's (rank >= 2) zero point per row: [M] broadcast as [M, 1].
const std::vector<int64_t> kPerRow{-1, 1};

}  // namespace

Status DequantizeLinear(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 1));
  std::string x = CastTo(ctx, ctx.input(0), DType::kFloat32, "x_f32");
  if (ctx.HasInput(2)) {
    LS_ASSIGN_OR_RETURN(std::string zp,
                        QuantParameter(ctx, CastTo(ctx, ctx.input(2), DType::kFloat32, "zp_f32"), 2, rank, axis, "zp_axis"));
    x = ctx.Emit("Sub", {x, zp}, {}, "centred");
  }
  LS_ASSIGN_OR_RETURN(std::string scale, QuantParameter(ctx, ctx.input(1), 1, rank, axis, "scale_axis"));
  outputs->push_back(ctx.Emit("Mul", {x, scale}));
  return Status::Ok();
}

Status QuantizeLinear(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 1));
  LS_ASSIGN_OR_RETURN(DType x_dtype, InputDType(ctx, 0));
  const std::string x = x_dtype == DType::kFloat32 ? ctx.input(0) : CastTo(ctx, ctx.input(0), DType::kFloat32, "x_f32");
  LS_ASSIGN_OR_RETURN(std::string scale, QuantParameter(ctx, ctx.input(1), 1, rank, axis, "scale_axis"));
  return Requantize(ctx, ctx.Emit("Div", {x, scale}, {}, "scaled"), DType::kFloat32, 2, rank, axis, outputs);
}

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = saturate(round(-min / y_scale)),
// y = saturate(round(x / y_scale) + y_zero_point), all uint8.
Status DynamicQuantizeLinear(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const std::string x = ctx.input(0);
  const std::string zero = ctx.EmitConstant(Tensor::Scalar<float>(0.0f), "zero");
  const AttrMap every_axis{{"keep_dims", false}};
  const std::string lo = ctx.Emit("Minimum", {ctx.Emit("Min", {x}, every_axis, "min"), zero}, {}, "lo");
  const std::string hi = ctx.Emit("Maximum", {ctx.Emit("Max", {x}, every_axis, "max"), zero}, {}, "hi");
  const std::string scale = ctx.Emit("Div", {ctx.Emit("Sub", {hi, lo}, {}, "span"),
                                             ctx.EmitConstant(Tensor::Scalar<float>(255.0f), "levels")},
                                     {}, "scale");
  const AttrMap uint8_range{{"min", 0.0}, {"max", 255.0}};
  const std::string zp = ctx.Emit(
      "Clip", {ctx.Emit("Round", {ctx.Emit("Div", {ctx.Emit("Neg", {lo}, {}, "neg_lo"), scale}, {}, "zp_real")}, {}, "zp_round")},
      uint8_range, "zp_saturate");
  const std::string q = ctx.Emit("Add", {ctx.Emit("Round", {ctx.Emit("Div", {x, scale}, {}, "scaled")}, {}, "round"), zp},
                                 {}, "shifted");
  outputs->push_back(CastTo(ctx, ctx.Emit("Clip", {q}, uint8_range, "saturate"), DType::kUInt8, ""));
  outputs->push_back(ctx.Emit("Identity", {scale}, {}, "y_scale"));
  outputs->push_back(CastTo(ctx, zp, DType::kUInt8, "y_zero_point"));
  return Status::Ok();
}

Status MatMulInteger(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const std::string a = Centered(ctx, 0, 2, kPerRow, "a");
  const std::string b = Centered(ctx, 1, 3, {}, "b");
  if (!ctx.InputSpec(0) || !ctx.InputSpec(1)) return ctx.UnknownUntilRunTime("operands of unknown rank");
  LS_ASSIGN_OR_RETURN(std::string product,
                      RunAsFloat(ctx, MatMul, {a, b}, {AsFloat64(*ctx.InputSpec(0)), AsFloat64(*ctx.InputSpec(1))}));
  outputs->push_back(CastTo(ctx, product, DType::kInt32, ""));
  return Status::Ok();
}

// (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point)
Status QLinearMatMul(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank_a, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int rank_b, ctx.InputRank(3));
  if (rank_a < 2 || rank_b < 2) return ctx.Unsupported("QLinearMatMul of a vector");
  const std::string a = Centered(ctx, 0, 2, kPerRow, "a");
  const std::string b = Centered(ctx, 3, 5, {}, "b");
  LS_ASSIGN_OR_RETURN(std::string product,
                      RunAsFloat(ctx, MatMul, {a, b}, {AsFloat64(*ctx.InputSpec(0)), AsFloat64(*ctx.InputSpec(3))}));
  const int rank = std::max(rank_a, rank_b);
  LS_ASSIGN_OR_RETURN(std::string multiplier, Multiplier(ctx, 1, 4, 6, rank, -2, -1));
  const std::string real = ctx.Emit("Mul", {product, multiplier}, {}, "real");
  return Requantize(ctx, real, DType::kFloat64, 7, rank, -1, outputs);
}

Status ConvInteger(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(1));
  if (!ctx.InputSpec(0)) return ctx.UnknownUntilRunTime("an input of unknown rank");
  std::vector<int64_t> per_filter(static_cast<size_t>(rank), 1);
  per_filter[0] = -1;
  const std::string x = Centered(ctx, 0, 2, {}, "x");
  const std::string w = Centered(ctx, 1, 3, per_filter, "w");
  LS_ASSIGN_OR_RETURN(std::string y,
                      RunAsFloat(ctx, Conv, {x, w}, {AsFloat64(*ctx.InputSpec(0)), AsFloat64(*ctx.InputSpec(1))}));
  outputs->push_back(CastTo(ctx, y, DType::kInt32, ""));
  return Status::Ok();
}

// (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B)
Status QLinearConv(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(3));
  if (!ctx.InputSpec(0)) return ctx.UnknownUntilRunTime("an input of unknown rank");
  std::vector<int64_t> per_filter(static_cast<size_t>(rank), 1);
  per_filter[0] = -1;
  const std::string x = Centered(ctx, 0, 2, {}, "x");
  const std::string w = Centered(ctx, 3, 5, per_filter, "w");
  std::vector<std::string> inputs{x, w};
  std::vector<std::optional<TensorSpec>> specs{AsFloat64(*ctx.InputSpec(0)), AsFloat64(*ctx.InputSpec(3))};
  if (ctx.HasInput(8)) {
    inputs.push_back(CastTo(ctx, ctx.input(8), DType::kFloat64, "bias_f64"));
    specs.push_back(ctx.InputSpec(8) ? std::optional<TensorSpec>(AsFloat64(*ctx.InputSpec(8))) : std::nullopt);
  }
  LS_ASSIGN_OR_RETURN(std::string acc, RunAsFloat(ctx, Conv, std::move(inputs), std::move(specs)));
  // The filter's scale is per output channel: axis 1 of the output.
  LS_ASSIGN_OR_RETURN(std::string multiplier, Multiplier(ctx, 1, 4, 6, rank, 1, 1));
  const std::string real = ctx.Emit("Mul", {acc, multiplier}, {}, "real");
  return Requantize(ctx, real, DType::kFloat64, 7, rank, 1, outputs);
}

Status BitShift(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::string direction, ctx.StringAttr("direction", ""));
  if (direction != "LEFT" && direction != "RIGHT") {
    return ctx.Error("direction must be LEFT or RIGHT, got '" + direction + "'");
  }
  outputs->push_back(ctx.Emit(direction == "LEFT" ? "ShiftLeft" : "ShiftRight", {ctx.input(0), ctx.input(1)}));
  return Status::Ok();
}

// BitwiseNot (opset 18): x ^ all ones, for every integer type.
Status BitwiseNot(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kBool || dtype == DType::kString) {
    return ctx.Error("BitwiseNot of " + std::string(DTypeName(dtype)) + " (integers only)");
  }
  Tensor ones(dtype, Shape{});
  std::memset(ones.mutable_raw_data(), 0xff, ones.byte_size());
  outputs->push_back(ctx.Emit("BitwiseXor", {ctx.input(0), ctx.EmitConstant(std::move(ones), "all_ones")}));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
