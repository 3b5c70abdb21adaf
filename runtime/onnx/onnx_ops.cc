// The element-wise, array and shape translators, and the table. Each is a small function per
// ONNX op (or family); the convolution, pooling, normalisation and matrix ones live in
// onnx_nn_ops.cc.
#include "runtime/onnx/onnx_ops.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/import/constants.h"
#include "runtime/onnx/onnx_patterns.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/onnx/onnx_translators.h"

namespace lockstep {
namespace onnx_import {

Tensor Scalar(DType dtype, double value) {
  switch (dtype) {
    case DType::kFloat64: return Tensor::Scalar<double>(value);
    case DType::kInt32: return Tensor::Scalar<int32_t>(static_cast<int32_t>(value));
    case DType::kInt64: return Tensor::Scalar<int64_t>(static_cast<int64_t>(value));
    case DType::kBool: return Tensor::Scalar<bool>(value != 0);
    default: return Tensor::Scalar<float>(static_cast<float>(value));
  }
}

StatusOr<DType> InputDType(const OnnxNodeContext& ctx, size_t i) {
  if (ctx.InputSpec(i)) return ctx.InputSpec(i)->dtype;
  return ctx.Unsupported("the element type of input " + std::to_string(i) + " is not known");
}

std::vector<int64_t> SwapWithLast(int rank, int axis) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) perm[static_cast<size_t>(d)] = d;
  std::swap(perm[static_cast<size_t>(axis)], perm.back());
  return perm;
}

namespace {

// Every ONNX input given, in order, to one Lockstep op without attributes: the element-wise
// ops (ONNX broadcasts as numpy does from opset 7 on, as Lockstep's do) and activations.
template <const char* kOp>
Status Direct(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    inputs.push_back(ctx.input(i));
  }
  outputs->push_back(ctx.Emit(kOp, std::move(inputs)));
  return Status::Ok();
}
#define LS_OP_NAME(name) constexpr char k##name[] = #name
LS_OP_NAME(Add); LS_OP_NAME(Sub); LS_OP_NAME(Mul); LS_OP_NAME(Div); LS_OP_NAME(Pow);
LS_OP_NAME(Relu); LS_OP_NAME(Sigmoid); LS_OP_NAME(Tanh); LS_OP_NAME(Identity); LS_OP_NAME(HardSwish);
LS_OP_NAME(Sqrt); LS_OP_NAME(Exp); LS_OP_NAME(Log); LS_OP_NAME(Neg); LS_OP_NAME(Abs); LS_OP_NAME(Sign);
LS_OP_NAME(Reciprocal); LS_OP_NAME(Floor); LS_OP_NAME(Ceil); LS_OP_NAME(Erf); LS_OP_NAME(Softplus);
LS_OP_NAME(Sin); LS_OP_NAME(Cos); LS_OP_NAME(Equal); LS_OP_NAME(Less); LS_OP_NAME(Greater);
LS_OP_NAME(LessEqual); LS_OP_NAME(GreaterEqual); LS_OP_NAME(Not); LS_OP_NAME(And); LS_OP_NAME(Or);
LS_OP_NAME(Xor); LS_OP_NAME(Where); LS_OP_NAME(Softsign); LS_OP_NAME(Tan); LS_OP_NAME(Asin);
LS_OP_NAME(Acos); LS_OP_NAME(Atan); LS_OP_NAME(Sinh); LS_OP_NAME(Cosh); LS_OP_NAME(Asinh); LS_OP_NAME(Acosh);
LS_OP_NAME(Atanh); LS_OP_NAME(Expand); LS_OP_NAME(Tile); LS_OP_NAME(Range);
LS_OP_NAME(Minimum); LS_OP_NAME(Maximum); LS_OP_NAME(BitwiseAnd); LS_OP_NAME(BitwiseOr); LS_OP_NAME(BitwiseXor);

// Every ONNX input given, in order, to one Lockstep op of the same attributes (the gathers
// and scatters by index tensors).
template <const char* kOp>
Status Passthrough(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    inputs.push_back(ctx.input(i));
  }
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  const std::string node = ctx.Emit(kOp, std::move(inputs), std::move(attrs));
  outputs->push_back(node);
  for (int k = 1; k < ctx.node().output_size(); ++k) outputs->push_back(node + ":" + std::to_string(k));
  return Status::Ok();
}
LS_OP_NAME(GatherElements); LS_OP_NAME(ScatterElements); LS_OP_NAME(GatherND); LS_OP_NAME(ScatterND);
LS_OP_NAME(CumSum); LS_OP_NAME(Compress); LS_OP_NAME(Unique); LS_OP_NAME(NonZero); LS_OP_NAME(ReverseSequence);
LS_OP_NAME(DepthToSpace); LS_OP_NAME(SpaceToDepth); LS_OP_NAME(IsNaN); LS_OP_NAME(IsInf); LS_OP_NAME(Round);
LS_OP_NAME(Shrink); LS_OP_NAME(Celu); LS_OP_NAME(Mish); LS_OP_NAME(NegativeLogLikelihoodLoss); LS_OP_NAME(Einsum); LS_OP_NAME(Det);

#undef LS_OP_NAME

// A pattern of ONNX nodes ending at this Mul or Div that runs as one op (onnx_patterns.h), when
// there is one: its output; else "".
std::string FusedPattern(OnnxNodeContext& ctx, std::string_view op) {
  const auto& spec = ctx.InputSpec(0);
  if (!spec || spec->dtype != DType::kFloat32) return "";
  if (op == "Mul") {
    if (std::optional<std::string> x = MatchErfGelu(ctx)) return ctx.Emit("Gelu", {ctx.sink().Translated(*x)});
    if (std::optional<std::string> x = MatchSilu(ctx)) return ctx.Emit("Silu", {ctx.sink().Translated(*x)});
  } else if (op == "Div") {
    if (std::optional<LayerNormMatch> ln = MatchLayerNorm(ctx)) {
      return ctx.Emit("LayerNormalize", {ctx.sink().Translated(ln->x)}, AttrMap{{"epsilon", ln->epsilon}});
    }
  }
  return "";
}

// Whether the node is Pow of a real base by a constant exponent of exactly 2 that broadcasts
// to nothing (one element, rank at most the base's).
bool IsSquare(const OnnxNodeContext& ctx) {
  const Tensor* e = ctx.ConstantInput(1);
  const auto& base = ctx.InputSpec(0);
  if (e == nullptr || e->num_elements() != 1 || !base || e->shape().rank() > base->shape.rank()) return false;
  if (base->dtype != DType::kFloat32 && base->dtype != DType::kFloat64) return false;
  StatusOr<double> v = ScalarValue(*e);
  return v.ok() && *v == 2.0;
}

// The binary element-wise ops. Before opset 7 they broadcast only when asked (broadcast = 1),
// B's dimensions lined up with A's from `axis` on (else from the end, as numpy does); the
// trailing dimensions B lacks are added as 1s. Pow from opset 12 takes an exponent of another
// type, converted to the base's.
template <const char* kOp>
Status Binary(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.num_inputs() != 2 || !ctx.HasInput(0) || !ctx.HasInput(1)) return ctx.Error("needs two inputs");
  std::string b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(int64_t broadcast, ctx.IntAttr("broadcast", 0));
  if (ctx.opset() < 7 && broadcast != 0 && ctx.HasAttr("axis")) {
    LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
    LS_ASSIGN_OR_RETURN(int rank_a, ctx.InputRank(0));
    LS_ASSIGN_OR_RETURN(int rank_b, ctx.InputRank(1));
    if (axis < 0) axis += rank_a;
    if (axis < 0 || axis + rank_b > rank_a) return ctx.Error("axis " + std::to_string(axis) + " does not fit the ranks");
    for (int64_t k = axis + rank_b; k < rank_a; ++k) {
      b = ctx.Emit("ExpandDims", {b}, AttrMap{{"axis", int64_t{-1}}}, "b_dim_" + std::to_string(k));
    }
  }
  if (const std::string fused = FusedPattern(ctx, kOp); !fused.empty()) {
    outputs->push_back(fused);
    return Status::Ok();
  }
  if (std::string_view(kOp) == "Pow" && IsSquare(ctx)) {
    // x^2 (LayerNorm's variance as PyTorch exports it) is a product: no pow per element.
    outputs->push_back(ctx.Emit("Mul", {ctx.input(0), ctx.input(0)}));
    return Status::Ok();
  }
  if (std::string_view(kOp) == "Pow" && ctx.InputSpec(0) && ctx.InputSpec(1) &&
      ctx.InputSpec(0)->dtype != ctx.InputSpec(1)->dtype) {
    b = ctx.Emit("Cast", {b}, AttrMap{{"dtype", ctx.InputSpec(0)->dtype}}, "exponent");
  }
  outputs->push_back(ctx.Emit(kOp, {ctx.input(0), b}));
  return Status::Ok();
}

// Max, Min, Sum, Mean of any number of inputs: a chain of the binary op (Mean divides at the
// end), each step broadcasting as the variadic op does.
template <const char* kBinary, bool kMean>
Status Variadic(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const size_t n = ctx.num_inputs();
  if (n == 0) return ctx.Error("needs at least one input");
  if (n == 1) {
    outputs->push_back(ctx.Emit("Identity", {ctx.input(0)}));
    return Status::Ok();
  }
  std::string acc = ctx.input(0);
  for (size_t i = 1; i < n; ++i) {
    // The last step is the node's value unless Mean still divides it.
    const bool last = i + 1 == n && !kMean;
    acc = ctx.Emit(kBinary, {acc, ctx.input(i)}, {}, last ? "" : "step_" + std::to_string(i));
  }
  if (kMean) {
    LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
    acc = ctx.Emit("Div", {acc, ctx.EmitConstant(Scalar(dtype, static_cast<double>(n)), "count")});
  }
  outputs->push_back(acc);
  return Status::Ok();
}

Status Dropout(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  // Inference: the identity. A training_mode input that is not a constant false would ask for
  // random masks at serving time, unless the ratio is a constant 0 (torchvision's Swin
  // exports its attention's dropout so): then training drops nothing either.
  const Tensor* ratio = ctx.ConstantInput(1);
  const bool drops_nothing = ratio != nullptr && ratio->num_elements() == 1 && ScalarValue(*ratio).ok() &&
                             *ScalarValue(*ratio) == 0.0;
  if (ctx.HasInput(2) && !drops_nothing) {
    const Tensor* training = ctx.ConstantInput(2);
    if (training == nullptr || training->dtype() != DType::kBool || training->num_elements() != 1 ||
        training->data<bool>()[0]) {
      return ctx.Unsupported("training_mode must be a constant false (inference)");
    }
  }
  outputs->push_back(ctx.Emit("Identity", {ctx.input(0)}));
  // The mask of inference: every element kept.
  const std::string dims = ctx.Emit("Shape", {ctx.input(0)}, {}, "mask_shape");
  outputs->push_back(ctx.Emit("ConstantOfShape", {dims}, AttrMap{{"dtype", DType::kBool}, {"value", 1.0}}, "mask"));
  return Status::Ok();
}

Status ThresholdedRelu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(float alpha, ctx.FloatAttr("alpha", 1.0f));
  outputs->push_back(ctx.Emit("ThresholdedRelu", {ctx.input(0)}, AttrMap{{"alpha", static_cast<double>(alpha)}}));
  return Status::Ok();
}

Status LeakyRelu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(float alpha, ctx.FloatAttr("alpha", 0.01f));
  outputs->push_back(ctx.Emit("LeakyRelu", {ctx.input(0)}, AttrMap{{"alpha", static_cast<double>(alpha)}}));
  return Status::Ok();
}

Status HardSigmoid(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(float alpha, ctx.FloatAttr("alpha", 0.2f));
  LS_ASSIGN_OR_RETURN(float beta, ctx.FloatAttr("beta", 0.5f));
  outputs->push_back(ctx.Emit("HardSigmoid", {ctx.input(0)},
                              AttrMap{{"alpha", static_cast<double>(alpha)}, {"beta", static_cast<double>(beta)}}));
  return Status::Ok();
}

// x > 0 ? x : alpha * (exp(x) - 1), from Lockstep's Elu (alpha 1) when alpha is not 1.
StatusOr<std::string> ScaledElu(OnnxNodeContext& ctx, float alpha) {
  if (alpha == 1.0f) return ctx.Emit("Elu", {ctx.input(0)}, {}, "elu");
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  const std::string elu = ctx.Emit("Elu", {ctx.input(0)}, {}, "elu");
  const std::string negative = ctx.Emit("Minimum", {elu, ctx.EmitConstant(Scalar(dtype, 0), "zero")}, {}, "negative");
  const std::string scaled = ctx.Emit("Mul", {negative, ctx.EmitConstant(Scalar(dtype, alpha), "alpha")}, {}, "scaled");
  return ctx.Emit("Add", {ctx.Emit("Relu", {ctx.input(0)}, {}, "positive"), scaled}, {}, "sum");
}

Status Elu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(float alpha, ctx.FloatAttr("alpha", 1.0f));
  LS_ASSIGN_OR_RETURN(std::string elu, ScaledElu(ctx, alpha));
  outputs->push_back(ctx.Emit("Identity", {elu}));
  return Status::Ok();
}

Status Selu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  constexpr float kAlpha = 1.67326319217681884765625f, kGamma = 1.05070102214813232421875f;
  LS_ASSIGN_OR_RETURN(float alpha, ctx.FloatAttr("alpha", kAlpha));
  LS_ASSIGN_OR_RETURN(float gamma, ctx.FloatAttr("gamma", kGamma));
  if (alpha == kAlpha && gamma == kGamma) {
    outputs->push_back(ctx.Emit("Selu", {ctx.input(0)}));
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  LS_ASSIGN_OR_RETURN(std::string elu, ScaledElu(ctx, alpha));
  outputs->push_back(ctx.Emit("Mul", {elu, ctx.EmitConstant(Scalar(dtype, gamma), "gamma")}));
  return Status::Ok();
}

// PRelu(x, slope) = x < 0 ? slope * x : x, slope broadcast to x: from the end (numpy) from
// opset 7 on; before, a vector slope is one per channel (axis 1).
Status PRelu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  std::string slope = ctx.input(1);
  const auto& x = ctx.InputSpec(0);
  const auto& s = ctx.InputSpec(1);
  if (ctx.opset() < 7 && x && s && s->shape.rank() == 1 && x->shape.rank() > 2 && s->shape.dim(0) != 1) {
    for (int d = 2; d < x->shape.rank(); ++d) {
      slope = ctx.Emit("ExpandDims", {slope}, AttrMap{{"axis", int64_t{-1}}}, "slope_" + std::to_string(d));
    }
  }
  const std::string zero = ctx.EmitConstant(Scalar(dtype, 0), "zero");
  const std::string negative = ctx.Emit("Minimum", {ctx.input(0), zero}, {}, "negative");
  const std::string scaled = ctx.Emit("Mul", {negative, slope}, {}, "scaled");
  outputs->push_back(ctx.Emit("Add", {ctx.Emit("Relu", {ctx.input(0)}, {}, "positive"), scaled}));
  return Status::Ok();
}

// The bounds of Clip: attributes before opset 11, inputs from then on. Constant bounds are the
// Clip op's attributes; a bound computed at run time makes Maximum then Minimum nodes, in that
// order, as the spec's min(max(x, lo), hi).
Status Clip(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.opset() < 11) {
    constexpr float kMax = std::numeric_limits<float>::max();
    LS_ASSIGN_OR_RETURN(float lo, ctx.FloatAttr("min", -kMax));
    LS_ASSIGN_OR_RETURN(float hi, ctx.FloatAttr("max", kMax));
    outputs->push_back(
        ctx.Emit("Clip", {ctx.input(0)}, AttrMap{{"min", static_cast<double>(lo)}, {"max", static_cast<double>(hi)}}));
    return Status::Ok();
  }
  bool dynamic = false;
  for (size_t i : {size_t{1}, size_t{2}}) {
    const Tensor* bound = ctx.ConstantInput(i);
    dynamic = dynamic || (ctx.HasInput(i) && (bound == nullptr || bound->num_elements() != 1));
  }
  if (dynamic) {
    std::string x = ctx.input(0);
    if (ctx.HasInput(1)) x = ctx.Emit("Maximum", {x, ctx.input(1)}, {}, ctx.HasInput(2) ? "min" : "");
    if (ctx.HasInput(2)) x = ctx.Emit("Minimum", {x, ctx.input(2)});
    outputs->push_back(x);
    return Status::Ok();
  }
  AttrMap attrs;
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!ctx.HasInput(i)) continue;
    const char* name = i == 1 ? "min" : "max";
    StatusOr<double> value = ScalarValue(*ctx.ConstantInput(i));
    if (!value.ok()) return ctx.Error(std::string("the ") + name + " bound: " + value.status().message());
    attrs.Set(name, *value);
  }
  outputs->push_back(ctx.Emit("Clip", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

// ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd: axes (attribute, or input 1 where
// the opset moved it there), keepdims, noop_with_empty_axes.
// Axes given as an input computed at run time: the reduction reads them then.
bool RunTimeAxes(const OnnxNodeContext& ctx) {
  return ctx.HasInput(1) && ctx.ConstantInput(1) == nullptr && !ctx.HasAttr("axes");
}

template <const char* kReduceOp>
Status Reduce(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  // Sums of integers (a count of true values, as scripted PyTorch writes any() and all()) are
  // IntegerSum's; Sum is the differentiable one, of reals.
  const auto& spec = ctx.InputSpec(0);
  const bool integer_sum = std::string_view(kReduceOp) == "Sum" && spec &&
                           (spec->dtype == DType::kInt32 || spec->dtype == DType::kInt64);
  const std::string kOp = integer_sum ? "IntegerSum" : kReduceOp;
  // The maximum or minimum of booleans (opset 20) is that of 0s and 1s.
  const bool boolean = spec && spec->dtype == DType::kBool && (kOp == "Max" || kOp == "Min");
  const std::string x = boolean ? ctx.Emit("Cast", {ctx.input(0)}, AttrMap{{"dtype", DType::kInt32}}, "as_int") : ctx.input(0);
  const std::string_view suffix = boolean ? "reduced" : "";
  auto emit = [&](const std::string& op, std::vector<std::string> inputs, AttrMap attrs) {
    const std::string y = ctx.Emit(op, std::move(inputs), std::move(attrs), suffix);
    outputs->push_back(boolean ? ctx.Emit("Cast", {y}, AttrMap{{"dtype", DType::kBool}}) : y);
    return Status::Ok();
  };
  LS_ASSIGN_OR_RETURN(int64_t keepdims, ctx.IntAttr("keepdims", 1));
  LS_ASSIGN_OR_RETURN(int64_t noop, ctx.IntAttr("noop_with_empty_axes", 0));
  if (RunTimeAxes(ctx)) {
    return emit(kOp, {x, ctx.input(1)}, AttrMap{{"keep_dims", keepdims != 0}, {"noop_with_empty_axes", noop != 0}});
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.AxesAttrOrInput("axes", 1));
  if ((!axes || axes->empty()) && noop != 0) {
    outputs->push_back(ctx.Emit("Identity", {ctx.input(0)}));
    return Status::Ok();
  }
  AttrMap attrs{{"keep_dims", keepdims != 0}};
  if (axes && !axes->empty()) attrs.Set("axes", *axes);  // Lockstep: no axes = every axis
  return emit(kOp, {x}, std::move(attrs));
}

// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum: Sum with an element-wise op before it
// (Mul by itself, Abs) and after it (Sqrt, Log). ReduceLogSumExp is not this: exp overflows
// where the spec's answer is finite, so it is refused until it has a stable form.
template <const char* kBefore, const char* kAfter>
Status ComposedReduce(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const bool run_time_axes = RunTimeAxes(ctx);
  std::optional<std::vector<int64_t>> axes;
  if (!run_time_axes) {
    LS_ASSIGN_OR_RETURN(axes, ctx.AxesAttrOrInput("axes", 1));
  }
  LS_ASSIGN_OR_RETURN(int64_t keepdims, ctx.IntAttr("keepdims", 1));
  LS_ASSIGN_OR_RETURN(int64_t noop, ctx.IntAttr("noop_with_empty_axes", 0));
  std::string x = ctx.input(0);
  const std::string_view before(kBefore), after(kAfter);
  if (before == "Mul") x = ctx.Emit("Mul", {x, x}, {}, "square");
  else if (!before.empty()) x = ctx.Emit(kBefore, {x}, {}, "before");
  AttrMap attrs{{"keep_dims", keepdims != 0}};
  std::vector<std::string> inputs{x};
  if (run_time_axes) {
    inputs.push_back(ctx.input(1));
    attrs.Set("noop_with_empty_axes", noop != 0);
  } else if (axes && !axes->empty()) {
    attrs.Set("axes", *axes);
  } else if (noop != 0) {
    attrs.Set("axes", std::vector<int64_t>{});
  }
  const std::string sum = ctx.Emit("Sum", std::move(inputs), std::move(attrs), after.empty() ? "" : "sum");
  outputs->push_back(after.empty() ? sum : ctx.Emit(kAfter, {sum}));
  return Status::Ok();
}
constexpr char kNone[] = "";

// ReduceLogSumExp = m + log(sum(exp(x - m))) with m the maximum over the same axes: exp never
// overflows where the answer is finite.
Status ReduceLogSumExp(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.AxesAttrOrInput("axes", 1));
  LS_ASSIGN_OR_RETURN(int64_t keepdims, ctx.IntAttr("keepdims", 1));
  LS_ASSIGN_OR_RETURN(int64_t noop, ctx.IntAttr("noop_with_empty_axes", 0));
  if ((!axes || axes->empty()) && noop != 0) {
    outputs->push_back(ctx.Emit("Identity", {ctx.input(0)}));
    return Status::Ok();
  }
  AttrMap kept{{"keep_dims", true}};
  if (axes && !axes->empty()) kept.Set("axes", *axes);
  AttrMap attrs = kept;
  attrs.Set("keep_dims", keepdims != 0);
  const std::string max_kept = ctx.Emit("Max", {ctx.input(0)}, kept, "max_kept");
  const std::string shifted = ctx.Emit("Sub", {ctx.input(0), max_kept}, {}, "shifted");
  const std::string sum = ctx.Emit("Sum", {ctx.Emit("Exp", {shifted}, {}, "exp")}, attrs, "sum");
  const std::string max = keepdims != 0 ? max_kept : ctx.Emit("Max", {ctx.input(0)}, attrs, "max");
  outputs->push_back(ctx.Emit("Add", {ctx.Emit("Log", {sum}, {}, "log"), max}));
  return Status::Ok();
}

constexpr char kMean[] = "Mean";
constexpr char kSum[] = "Sum";
constexpr char kMax[] = "Max";
constexpr char kMin[] = "Min";
constexpr char kProd[] = "Prod";

// Mod: fmod 0 takes the divisor's sign (integers only, in the spec), fmod 1 the dividend's.
Status Mod(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t fmod, ctx.IntAttr("fmod", 0));
  if (fmod != 0 && fmod != 1) return ctx.Error("fmod must be 0 or 1, got " + std::to_string(fmod));
  outputs->push_back(ctx.Emit(fmod == 1 ? "FMod" : "Mod", {ctx.input(0), ctx.input(1)}));
  return Status::Ok();
}

Status Trilu(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t upper, ctx.IntAttr("upper", 1));
  std::vector<std::string> inputs{ctx.input(0)};
  if (ctx.HasInput(1)) inputs.push_back(ctx.input(1));
  outputs->push_back(ctx.Emit("Trilu", std::move(inputs), AttrMap{{"upper", upper != 0}}));
  return Status::Ok();
}

Status EyeLike(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t k, ctx.IntAttr("k", 0));
  AttrMap attrs{{"k", k}};
  if (ctx.HasAttr("dtype")) {
    LS_ASSIGN_OR_RETURN(int64_t type, ctx.IntAttr("dtype", 0));
    StatusOr<DType> dtype = OnnxElemTypeToDType(static_cast<int32_t>(type));
    if (!dtype.ok()) return ctx.Unsupported("dtype " + OnnxElemTypeName(static_cast<int32_t>(type)));
    attrs.Set("dtype", ComputeDType(*dtype));
  }
  outputs->push_back(ctx.Emit("EyeLike", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

// TopK: k an attribute before opset 10, an input from then on.
Status TopK(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  std::string k = ctx.HasInput(1) ? ctx.input(1) : "";
  if (ctx.opset() < 10) {
    LS_ASSIGN_OR_RETURN(int64_t value, ctx.IntAttr("k", -1));
    if (value < 0) return ctx.Error("needs the attribute k");
    k = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {value}), "k");
  }
  if (k.empty()) return ctx.Error("needs k");
  AttrMap kept;
  for (const char* name : {"axis", "largest", "sorted"}) {
    if (attrs.Has(name)) kept.Set(name, attrs.values().at(name));
  }
  const std::string node = ctx.Emit("TopK", {ctx.input(0), k}, std::move(kept));
  outputs->push_back(node);
  outputs->push_back(node + ":1");
  return Status::Ok();
}

// SoftmaxCrossEntropyLoss(scores [N, C, d...], labels, weights?) = NegativeLogLikelihoodLoss
// of the scores' LogSoftmax over the classes (axis 1), which is its second output.
Status SoftmaxCrossEntropyLoss(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (rank < 2) return ctx.Error("scores must have rank 2 or more");
  std::string log_prob;
  if (rank == 2) {
    log_prob = ctx.Emit("LogSoftmax", {ctx.input(0)}, {}, "log_prob");
  } else {
    const std::vector<int64_t> perm = SwapWithLast(rank, 1);
    const std::string moved = ctx.Emit("Transpose", {ctx.input(0)}, AttrMap{{"perm", perm}}, "classes_last");
    const std::string y = ctx.Emit("LogSoftmax", {moved}, {}, "log_prob_last");
    log_prob = ctx.Emit("Transpose", {y}, AttrMap{{"perm", perm}}, "log_prob");
  }
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  std::vector<std::string> inputs{log_prob, ctx.input(1)};
  if (ctx.HasInput(2)) inputs.push_back(ctx.input(2));
  outputs->push_back(ctx.Emit("NegativeLogLikelihoodLoss", std::move(inputs), std::move(attrs)));
  outputs->push_back(log_prob);
  return Status::Ok();
}

// OneHot(indices, depth, values [off, on]; axis = -1): a new axis of `depth` (a constant),
// values[1] where it is the index (counted from the end when negative), values[0] elsewhere,
// also for an index outside [-depth, depth).
Status OneHot(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", -1));
  if (axis < -(rank + 1) || axis > rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank + 1;
  // The positions 0..depth-1 along the new axis, shaped to broadcast against the indices: a
  // constant when the depth is, else a Range of the depth computed per request.
  std::vector<int64_t> positions_dims{-1};
  for (int64_t d = axis + 1; d <= rank; ++d) positions_dims.push_back(1);
  std::string depth, range;
  if (const Tensor* depth_tensor = ctx.ConstantInput(1)) {
    StatusOr<double> depth_value = depth_tensor->num_elements() == 1 ? ScalarValue(*depth_tensor)
                                                                     : StatusOr<double>(InvalidArgument("not one value"));
    if (!depth_value.ok() || !(*depth_value >= 1) || *depth_value > (int64_t{1} << 24)) {
      return ctx.Error("depth must be one number in [1, 2^24]");
    }
    const int64_t n = static_cast<int64_t>(*depth_value);
    depth = ctx.EmitConstant(Tensor::Scalar<int64_t>(n), "depth");
    std::vector<int64_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
    positions_dims[0] = n;
    range = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape::FromDims(positions_dims).value(), positions), "positions");
  } else {
    depth = ctx.Emit("Reshape", {ctx.Emit("Cast", {ctx.input(1)}, AttrMap{{"dtype", DType::kInt64}}, "depth_int64")},
                     AttrMap{{"shape", std::vector<int64_t>{}}}, "depth");
    const std::string positions = ctx.Emit(
        "Range", {ctx.EmitConstant(Tensor::Scalar<int64_t>(0), "first"), depth, ctx.EmitConstant(Tensor::Scalar<int64_t>(1), "step")},
        {}, "positions");
    range = ctx.Emit("Reshape", {positions}, AttrMap{{"shape", positions_dims}}, "positions_along_axis");
  }
  LS_ASSIGN_OR_RETURN(DType index_type, InputDType(ctx, 0));
  // The indices as int64, wrapped from the end, with the new axis; their equality with the
  // positions broadcasts to the output.
  std::string index = index_type == DType::kInt64 ? ctx.input(0)
                                                  : ctx.Emit("Cast", {ctx.input(0)}, AttrMap{{"dtype", DType::kInt64}}, "int64");
  const std::string zero = ctx.EmitConstant(Tensor::Scalar<int64_t>(0), "zero");
  const std::string wrapped = ctx.Emit("Add", {index, depth}, {}, "wrapped");
  index = ctx.Emit("Where", {ctx.Emit("Less", {index, zero}, {}, "negative"), wrapped, index}, {}, "index");
  index = ctx.Emit("ExpandDims", {index}, AttrMap{{"axis", axis}}, "expanded");
  const std::string hot = ctx.Emit("Equal", {index, range}, {}, "hot");
  const std::string starts0 = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {0}), "off_start");
  const std::string starts1 = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {1}), "on_start");
  const std::string ends2 = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {2}), "on_end");
  const std::string off = ctx.Emit("Reshape", {ctx.Emit("Slice", {ctx.input(2), starts0, starts1}, {}, "off_slice")},
                                   AttrMap{{"shape", std::vector<int64_t>{}}}, "off");
  const std::string on = ctx.Emit("Reshape", {ctx.Emit("Slice", {ctx.input(2), starts1, ends2}, {}, "on_slice")},
                                  AttrMap{{"shape", std::vector<int64_t>{}}}, "on");
  outputs->push_back(ctx.Emit("Where", {hot, on, off}));
  return Status::Ok();
}

template <const char* kOp>
Status ArgReduce(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  LS_ASSIGN_OR_RETURN(int64_t keepdims, ctx.IntAttr("keepdims", 1));
  LS_ASSIGN_OR_RETURN(int64_t last, ctx.IntAttr("select_last_index", 0));
  AttrMap attrs{{"axis", axis}, {"keep_dims", keepdims != 0}};
  if (last != 0) attrs.Set("select_last_index", true);
  outputs->push_back(ctx.Emit(kOp, {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}
constexpr char kArgMax[] = "ArgMax";
constexpr char kArgMin[] = "ArgMin";

const std::map<std::string, OnnxTranslator, std::less<>>& Table() {
  static const std::map<std::string, OnnxTranslator, std::less<>> table{
      {"Abs", Direct<kAbs>}, {"Add", Binary<kAdd>}, {"And", Binary<kAnd>}, {"ArgMax", ArgReduce<kArgMax>},
      {"ArgMin", ArgReduce<kArgMin>}, {"AveragePool", AveragePool}, {"BatchNormalization", BatchNormalization},
      {"Cast", Cast}, {"CastLike", CastLike}, {"Ceil", Direct<kCeil>}, {"Clip", Clip}, {"Concat", Concat}, {"Constant", Constant},
      {"ConstantOfShape", ConstantOfShape}, {"Conv", Conv}, {"ConvTranspose", ConvTranspose}, {"Cos", Direct<kCos>}, {"Div", Binary<kDiv>},
      {"Dropout", Dropout}, {"Elu", Elu}, {"Equal", Binary<kEqual>}, {"Erf", Direct<kErf>}, {"Exp", Direct<kExp>},
      {"Expand", Direct<kExpand>}, {"Flatten", Flatten}, {"Floor", Direct<kFloor>}, {"Gather", Gather},
      {"Gemm", Gemm}, {"GlobalAveragePool", GlobalAveragePool}, {"GlobalMaxPool", GlobalMaxPool},
      {"Greater", Binary<kGreater>}, {"GreaterOrEqual", Binary<kGreaterEqual>}, {"HardSigmoid", HardSigmoid},
      {"HardSwish", Direct<kHardSwish>}, {"Identity", Direct<kIdentity>}, {"LayerNormalization", LayerNormalization},
      {"LeakyRelu", LeakyRelu}, {"Less", Binary<kLess>}, {"LessOrEqual", Binary<kLessEqual>}, {"Log", Direct<kLog>},
      {"LogSoftmax", LogSoftmax}, {"MatMul", MatMul}, {"Max", Variadic<kMaximum, false>}, {"MaxPool", MaxPool},
      {"Mean", Variadic<kAdd, true>}, {"Min", Variadic<kMinimum, false>}, {"Mul", Binary<kMul>},
      {"Neg", Direct<kNeg>}, {"Not", Direct<kNot>}, {"Or", Binary<kOr>}, {"PRelu", PRelu}, {"Pad", Pad},
      {"Pow", Binary<kPow>}, {"Range", Direct<kRange>}, {"Reciprocal", Direct<kReciprocal>},
      {"ReduceMax", Reduce<kMax>}, {"ReduceMean", Reduce<kMean>}, {"ReduceMin", Reduce<kMin>},
      {"ReduceProd", Reduce<kProd>}, {"ReduceSum", Reduce<kSum>}, {"Relu", Direct<kRelu>}, {"Reshape", Reshape},
      {"Selu", Selu}, {"Shape", ShapeOp}, {"Sigmoid", Direct<kSigmoid>}, {"Sign", Direct<kSign>},
      {"Sin", Direct<kSin>}, {"Slice", Slice}, {"Softmax", Softmax}, {"Softplus", Direct<kSoftplus>},
      {"Split", Split}, {"Sqrt", Direct<kSqrt>}, {"Squeeze", Squeeze}, {"Sub", Binary<kSub>},
      {"Sum", Variadic<kAdd, false>}, {"Tanh", Direct<kTanh>}, {"Tile", Tile}, {"Transpose", Transpose},
      {"Unsqueeze", Unsqueeze}, {"ThresholdedRelu", ThresholdedRelu}, {"Size", Size},
      {"Softsign", Direct<kSoftsign>}, {"Tan", Direct<kTan>}, {"Asin", Direct<kAsin>}, {"Acos", Direct<kAcos>},
      {"Atan", Direct<kAtan>}, {"Sinh", Direct<kSinh>}, {"Cosh", Direct<kCosh>}, {"Asinh", Direct<kAsinh>},
      {"Acosh", Direct<kAcosh>}, {"Atanh", Direct<kAtanh>},
      {"If", If}, {"Loop", Loop}, {"Scan", Scan}, {"SequenceEmpty", SequenceEmpty},
      {"SequenceConstruct", SequenceConstruct}, {"SequenceInsert", SequenceInsert}, {"SequenceErase", SequenceErase},
      {"SequenceAt", SequenceAt}, {"SequenceLength", SequenceLength}, {"SplitToSequence", SplitToSequence},
      {"ConcatFromSequence", ConcatFromSequence},
      {"MelWeightMatrix", MelWeightMatrix}, {"TfIdfVectorizer", TfIdfVectorizer},
      {"ReduceSumSquare", ComposedReduce<kMul, kNone>}, {"ReduceL1", ComposedReduce<kAbs, kNone>},
      {"ReduceL2", ComposedReduce<kMul, kSqrt>}, {"ReduceLogSum", ComposedReduce<kNone, kLog>},
      {"Where", Direct<kWhere>}, {"Xor", Binary<kXor>}, {"Mod", Mod}, {"Trilu", Trilu}, {"EyeLike", EyeLike},
      {"Resize", Resize}, {"Upsample", Upsample}, {"GatherElements", Passthrough<kGatherElements>},
      {"ScatterElements", Passthrough<kScatterElements>}, {"Scatter", Passthrough<kScatterElements>},
      {"GatherND", Passthrough<kGatherND>}, {"ScatterND", Passthrough<kScatterND>},
      {"CumSum", Passthrough<kCumSum>}, {"Compress", Passthrough<kCompress>}, {"Unique", Passthrough<kUnique>},
      {"NonZero", Passthrough<kNonZero>}, {"ReverseSequence", Passthrough<kReverseSequence>},
      {"DepthToSpace", Passthrough<kDepthToSpace>}, {"SpaceToDepth", Passthrough<kSpaceToDepth>},
      {"IsNaN", Passthrough<kIsNaN>}, {"IsInf", Passthrough<kIsInf>}, {"Round", Direct<kRound>},
      {"Shrink", Passthrough<kShrink>}, {"Celu", Passthrough<kCelu>}, {"Mish", Direct<kMish>},
      {"NegativeLogLikelihoodLoss", Passthrough<kNegativeLogLikelihoodLoss>}, {"TopK", TopK},
      {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss}, {"OneHot", OneHot}, {"Hardmax", Hardmax},
      {"ReduceLogSumExp", ReduceLogSumExp}, {"GridSample", GridSample}, {"RoiAlign", RoiAlign}, {"Gelu", Gelu},
      {"GroupNormalization", GroupNormalization}, {"RMSNormalization", RmsNormalization},
      {"BitwiseAnd", Binary<kBitwiseAnd>}, {"BitwiseOr", Binary<kBitwiseOr>}, {"BitwiseXor", Binary<kBitwiseXor>},
      {"BitwiseNot", BitwiseNot},
      {"RotaryEmbedding", RotaryEmbedding}, {"Attention", Attention},
      {"NonMaxSuppression", NonMaxSuppression}, {"HannWindow", WindowFunction}, {"HammingWindow", WindowFunction},
      {"BlackmanWindow", WindowFunction}, {"DFT", Dft}, {"STFT", Stft}, {"RNN", Recurrent}, {"GRU", Recurrent},
      {"LSTM", Recurrent}, {"InstanceNormalization", InstanceNormalization},
      {"MeanVarianceNormalization", MeanVarianceNormalization}, {"Einsum", Passthrough<kEinsum>}, {"Det", Passthrough<kDet>}, {"LpNormalization", LpNormalization}, {"LRN", Lrn},
      {"QuantizeLinear", QuantizeLinear}, {"DequantizeLinear", DequantizeLinear},
      {"DynamicQuantizeLinear", DynamicQuantizeLinear}, {"MatMulInteger", MatMulInteger},
      {"QLinearMatMul", QLinearMatMul}, {"ConvInteger", ConvInteger}, {"QLinearConv", QLinearConv},
      {"BitShift", BitShift}, {"StringNormalizer", StringNormalizer},
      {"MaxUnpool", MaxUnpool},
  };
  return table;
}

}  // namespace
}  // namespace onnx_import

OnnxTranslator FindOnnxTranslator(std::string_view op_type) {
  const auto& table = onnx_import::Table();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : it->second;
}

std::vector<std::string> OnnxTranslatedOps() {
  std::vector<std::string> ops;
  for (const auto& [name, translator] : onnx_import::Table()) ops.push_back(name);
  return ops;
}

}  // namespace lockstep
