// Element-wise ops, the targets of ONNX's element-wise operators. Unary: maths (Sqrt, Exp, Log,
// Reciprocal, Floor, Ceil, Erf, Softplus, Softsign, the trigonometric and hyperbolic functions
// and their inverses) on float32/float64; Neg, Abs, Sign on the
// numeric dtypes; the parametric activations LeakyRelu, HardSigmoid, HardSwish,
// ThresholdedRelu, Celu, Mish, Shrink; Round; Clip; logical Not; IsNaN and IsInf (bool out).
// With numpy broadcasting (runtime/ops/broadcast.h): Pow,
// Minimum, Maximum; the comparisons Equal, Less, Greater, LessEqual, GreaterEqual (bool out);
// the logical And, Or, Xor; and Where. Both operands of a binary op share one dtype: the
// importer inserts Casts where ONNX would have them, and nothing here promotes. None is
// differentiated.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "runtime/activation.h"
#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/broadcast.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

// ---- Unary ----

enum class UnaryOp {
  kSqrt, kExp, kLog, kReciprocal, kFloor, kCeil, kErf, kSoftplus, kSoftsign, kSin, kCos, kTan,
  kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kNeg, kAbs, kSign,
  kLeakyRelu, kHardSigmoid, kHardSwish, kThresholdedRelu, kClip,
  kNot,
  kRound, kShrink, kCelu, kMish,
};

struct UnaryInfo {
  std::string_view name;
  DTypeSet dtypes;
  // A few cycles per element, against tens for a libm call: decides the ParallelFor grain.
  bool cheap;
};

constexpr UnaryInfo Info(UnaryOp op) {
  switch (op) {
    case UnaryOp::kSqrt: return {"Sqrt", DTypeSet::kReal, true};
    case UnaryOp::kExp: return {"Exp", DTypeSet::kReal, false};
    case UnaryOp::kLog: return {"Log", DTypeSet::kReal, false};
    case UnaryOp::kReciprocal: return {"Reciprocal", DTypeSet::kReal, true};
    case UnaryOp::kFloor: return {"Floor", DTypeSet::kReal, true};
    case UnaryOp::kCeil: return {"Ceil", DTypeSet::kReal, true};
    case UnaryOp::kErf: return {"Erf", DTypeSet::kReal, false};
    case UnaryOp::kSoftplus: return {"Softplus", DTypeSet::kReal, false};
    case UnaryOp::kSin: return {"Sin", DTypeSet::kReal, false};
    case UnaryOp::kCos: return {"Cos", DTypeSet::kReal, false};
    case UnaryOp::kTan: return {"Tan", DTypeSet::kReal, false};
    case UnaryOp::kAsin: return {"Asin", DTypeSet::kReal, false};
    case UnaryOp::kAcos: return {"Acos", DTypeSet::kReal, false};
    case UnaryOp::kAtan: return {"Atan", DTypeSet::kReal, false};
    case UnaryOp::kSinh: return {"Sinh", DTypeSet::kReal, false};
    case UnaryOp::kCosh: return {"Cosh", DTypeSet::kReal, false};
    case UnaryOp::kAsinh: return {"Asinh", DTypeSet::kReal, false};
    case UnaryOp::kAcosh: return {"Acosh", DTypeSet::kReal, false};
    case UnaryOp::kAtanh: return {"Atanh", DTypeSet::kReal, false};
    case UnaryOp::kSoftsign: return {"Softsign", DTypeSet::kReal, true};
    case UnaryOp::kNeg: return {"Neg", DTypeSet::kNumeric, true};
    case UnaryOp::kAbs: return {"Abs", DTypeSet::kNumeric, true};
    case UnaryOp::kSign: return {"Sign", DTypeSet::kNumeric, true};
    case UnaryOp::kLeakyRelu: return {"LeakyRelu", DTypeSet::kReal, true};
    case UnaryOp::kHardSigmoid: return {"HardSigmoid", DTypeSet::kReal, true};
    case UnaryOp::kHardSwish: return {"HardSwish", DTypeSet::kReal, true};
    case UnaryOp::kThresholdedRelu: return {"ThresholdedRelu", DTypeSet::kReal, true};
    case UnaryOp::kClip: return {"Clip", DTypeSet::kArithmetic, true};
    case UnaryOp::kNot: return {"Not", DTypeSet::kBool, true};
    case UnaryOp::kRound: return {"Round", DTypeSet::kReal, true};
    case UnaryOp::kShrink: return {"Shrink", DTypeSet::kReal, true};
    case UnaryOp::kCelu: return {"Celu", DTypeSet::kReal, false};
    case UnaryOp::kMish: return {"Mish", DTypeSet::kReal, false};
  }
  return {"", DTypeSet::kBool, true};
}

// The attrs of the parametric ops, as read (zero where the op has none): alpha for LeakyRelu,
// ThresholdedRelu and Celu; alpha and beta for HardSigmoid; min and max for Clip; lambd and
// bias for Shrink.
struct UnaryParams {
  double a = 0.0, b = 0.0;
};

// Defaults are ONNX's, so that the importer need only copy the attrs a model sets.
StatusOr<UnaryParams> ReadParams(UnaryOp op, const AttrMap& attrs) {
  UnaryParams p;
  if (op == UnaryOp::kLeakyRelu) {
    LS_ASSIGN_OR_RETURN(p.a, attrs.GetFloatOr("alpha", 0.01));
  } else if (op == UnaryOp::kThresholdedRelu) {
    LS_ASSIGN_OR_RETURN(p.a, attrs.GetFloatOr("alpha", 1.0));
  } else if (op == UnaryOp::kCelu) {
    LS_ASSIGN_OR_RETURN(p.a, attrs.GetFloatOr("alpha", 1.0));
    if (p.a == 0) return InvalidArgument("Celu: attr 'alpha' must not be 0");
  } else if (op == UnaryOp::kShrink) {
    LS_ASSIGN_OR_RETURN(p.a, attrs.GetFloatOr("lambd", 0.5));
    LS_ASSIGN_OR_RETURN(p.b, attrs.GetFloatOr("bias", 0.0));
  } else if (op == UnaryOp::kHardSigmoid) {
    LS_ASSIGN_OR_RETURN(p.a, attrs.GetFloatOr("alpha", 0.2));
    LS_ASSIGN_OR_RETURN(p.b, attrs.GetFloatOr("beta", 0.5));
  } else if (op == UnaryOp::kClip) {
    // An absent bound is no bound.
    constexpr double kInf = std::numeric_limits<double>::infinity();
    LS_ASSIGN_OR_RETURN(p.a, attrs.GetFloatOr("min", -kInf));
    LS_ASSIGN_OR_RETURN(p.b, attrs.GetFloatOr("max", kInf));
    // A NaN bound would make every comparison false and the result depend on the order of
    // the clamps; no model means it.
    if (std::isnan(p.a) || std::isnan(p.b)) return InvalidArgument("Clip: attrs 'min' and 'max' must not be NaN");
  }
  return p;
}

// double -> float without the undefined behaviour of converting an out-of-range value:
// beyond float's range a value becomes the infinity of its sign, as IEEE rounding would.
template <typename T>
T NarrowReal(double v) {
  if constexpr (std::is_same_v<T, float>) {
    if (v > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
    if (v < std::numeric_limits<float>::lowest()) return -std::numeric_limits<float>::infinity();
  }
  return static_cast<T>(v);
}

// A whole-number double (or an infinity) as the nearest integer T: saturates at T's range.
template <typename T>
T SaturateInt(double v) {
  // Both limits are powers of two (or one less), so the comparisons against them are exact.
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// UnaryParams in the element type. Integer Clip keeps exactly the integers within [min, max],
// hence the ceiling of min and the floor of max.
template <typename T>
struct TypedParams {
  T a{}, b{};
};

template <UnaryOp Op, typename T>
TypedParams<T> ToTyped(const UnaryParams& p) {
  if constexpr (std::is_floating_point_v<T>) {
    return {NarrowReal<T>(p.a), NarrowReal<T>(p.b)};
  } else if constexpr (Op == UnaryOp::kClip) {
    return {SaturateInt<T>(std::ceil(p.a)), SaturateInt<T>(std::floor(p.b))};
  } else {
    return {};
  }
}

// max(0, min(1, v)) with NaN propagated (std::min/max would turn a NaN into a bound).
template <typename T>
T UnitClamp(T v) {
  return v < T(0) ? T(0) : v > T(1) ? T(1) : v;
}

template <UnaryOp Op, typename T>
T ApplyUnary(T x, const TypedParams<T>& p) {
  if constexpr (Op == UnaryOp::kSqrt) return std::sqrt(x);
  if constexpr (Op == UnaryOp::kExp) return std::exp(x);
  if constexpr (Op == UnaryOp::kLog) return std::log(x);
  if constexpr (Op == UnaryOp::kReciprocal) return T(1) / x;
  if constexpr (Op == UnaryOp::kFloor) return std::floor(x);
  if constexpr (Op == UnaryOp::kCeil) return std::ceil(x);
  if constexpr (Op == UnaryOp::kErf) return std::erf(x);
  // log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): nothing overflows, and log1p keeps the tiny
  // e^-|x| that 1 + e^-|x| would round away (softplus(-100) is e^-100, not 0).
  if constexpr (Op == UnaryOp::kSoftplus) return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  if constexpr (Op == UnaryOp::kSin) return std::sin(x);
  if constexpr (Op == UnaryOp::kCos) return std::cos(x);
  if constexpr (Op == UnaryOp::kTan) return std::tan(x);
  if constexpr (Op == UnaryOp::kAsin) return std::asin(x);
  if constexpr (Op == UnaryOp::kAcos) return std::acos(x);
  if constexpr (Op == UnaryOp::kAtan) return std::atan(x);
  if constexpr (Op == UnaryOp::kSinh) return std::sinh(x);
  if constexpr (Op == UnaryOp::kCosh) return std::cosh(x);
  if constexpr (Op == UnaryOp::kAsinh) return std::asinh(x);
  if constexpr (Op == UnaryOp::kAcosh) return std::acosh(x);
  if constexpr (Op == UnaryOp::kAtanh) return std::atanh(x);
  if constexpr (Op == UnaryOp::kSoftsign) return x / (T(1) + std::fabs(x));
  if constexpr (Op == UnaryOp::kNeg || Op == UnaryOp::kAbs) {
    if constexpr (std::is_floating_point_v<T>) {
      return Op == UnaryOp::kNeg ? -x : std::fabs(x);
    } else {
      // Through unsigned, so that -min wraps to min (as numpy and onnxruntime give) instead
      // of being undefined.
      using U = std::make_unsigned_t<T>;
      const T neg = static_cast<T>(U{0} - static_cast<U>(x));
      return (Op == UnaryOp::kNeg || x < 0) ? neg : x;
    }
  }
  // Zero (of either sign) and NaN are their own sign.
  if constexpr (Op == UnaryOp::kSign) return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;
  if constexpr (Op == UnaryOp::kLeakyRelu) return x < T(0) ? p.a * x : x;
  if constexpr (Op == UnaryOp::kHardSigmoid) return UnitClamp(p.a * x + p.b);
  if constexpr (Op == UnaryOp::kHardSwish) return HardSwish(x);  // as the epilogue's (activation.h)
  if constexpr (Op == UnaryOp::kThresholdedRelu) return x > p.a ? x : T(0);
  // min(max(x, lo), hi): a NaN x stays NaN; lo > hi gives hi everywhere, as numpy.clip.
  if constexpr (Op == UnaryOp::kClip) {
    const T lo = x < p.a ? p.a : x;
    return lo > p.b ? p.b : lo;
  }
  if constexpr (Op == UnaryOp::kNot) return !x;
  // Halves to even, as ONNX's Round and numpy's.
  if constexpr (Op == UnaryOp::kRound) return std::nearbyint(x);
  if constexpr (Op == UnaryOp::kShrink) return x < -p.a ? x + p.b : x > p.a ? x - p.b : T(0);
  if constexpr (Op == UnaryOp::kCelu) return std::max(T(0), x) + std::min(T(0), p.a * std::expm1(x / p.a));
  if constexpr (Op == UnaryOp::kMish) {
    const T softplus = x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    return x * std::tanh(softplus);
  }
}

template <UnaryOp Op>
StatusOr<std::vector<TensorSpec>> InferUnary(const ShapeInferenceContext& ctx) {
  constexpr UnaryInfo info = Info(Op);
  LS_RETURN_IF_ERROR(CheckInputCount(info.name, ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckDTypeIn(info.name, ctx.inputs[0].dtype, info.dtypes));
  LS_RETURN_IF_ERROR(ReadParams(Op, ctx.attrs).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

template <UnaryOp Op, typename T>
Status UnaryKernelTyped(KernelContext& ctx, const UnaryParams& params) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  const TypedParams<T> p = ToTyped<Op, T>(params);
  const T* px = x.data<T>().data();
  T* po = out->mutable_data<T>().data();
  const int64_t grain = Info(Op).cheap ? kElementGrain : kElementGrain / 8;
  ctx.pool().ParallelFor(x.num_elements(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = ApplyUnary<Op, T>(px[i], p);
  });
  return Status::Ok();
}

template <UnaryOp Op>
Status UnaryKernel(KernelContext& ctx) {
  constexpr UnaryInfo info = Info(Op);
  LS_RETURN_IF_ERROR(CheckDTypeIn(info.name, ctx.input(0).dtype(), info.dtypes));
  LS_ASSIGN_OR_RETURN(UnaryParams params, ReadParams(Op, ctx.attrs()));
  return DispatchDTypeIn<info.dtypes>(ctx.input(0).dtype(), [&](auto t) {
    return UnaryKernelTyped<Op, decltype(t)>(ctx, params);
  });
}

// The gradients of the activations here that model-train's layers use: dy times the
// derivative at x (gradient_ops.cc), with LeakyRelu's alpha passed on.
template <UnaryOp Op>
Status ActivationGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const std::string_view grad = Op == UnaryOp::kLeakyRelu ? "LeakyReluGrad" : "HardSwishGrad";
  g.SetInputGrad(0, g.Op(grad, {g.output_grad(0), g.input(0)}, g.attrs()));
  return Status::Ok();
}

template <UnaryOp Op>
OpDef UnaryDef() {
  GradientFn gradient = nullptr;
  if constexpr (Op == UnaryOp::kLeakyRelu || Op == UnaryOp::kHardSwish) gradient = ActivationGrad<Op>;
  return SimpleOpDef(std::string(Info(Op).name), 1, InferUnary<Op>, UnaryKernel<Op>, gradient);
}

// ---- Binary, with numpy broadcasting ----

enum class BinaryKind {
  kPow, kMinimum, kMaximum,
  kEqual, kLess, kGreater, kLessEqual, kGreaterEqual,
  kAnd, kOr, kXor,
  kBitwiseAnd, kBitwiseOr, kBitwiseXor,
};

struct BinaryInfo {
  std::string_view name;
  DTypeSet dtypes;
  bool bool_output;  // comparisons and logic: the result is bool whatever the inputs are
};

constexpr BinaryInfo Info(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::kPow: return {"Pow", DTypeSet::kArithmetic, false};
    case BinaryKind::kMinimum: return {"Minimum", DTypeSet::kArithmetic, false};
    case BinaryKind::kMaximum: return {"Maximum", DTypeSet::kArithmetic, false};
    case BinaryKind::kEqual: return {"Equal", DTypeSet::kArithmeticOrBool, true};
    case BinaryKind::kLess: return {"Less", DTypeSet::kArithmetic, true};
    case BinaryKind::kGreater: return {"Greater", DTypeSet::kArithmetic, true};
    case BinaryKind::kLessEqual: return {"LessEqual", DTypeSet::kArithmetic, true};
    case BinaryKind::kGreaterEqual: return {"GreaterEqual", DTypeSet::kArithmetic, true};
    case BinaryKind::kAnd: return {"And", DTypeSet::kBool, true};
    case BinaryKind::kOr: return {"Or", DTypeSet::kBool, true};
    case BinaryKind::kXor: return {"Xor", DTypeSet::kBool, true};
    case BinaryKind::kBitwiseAnd: return {"BitwiseAnd", DTypeSet::kInteger, false};
    case BinaryKind::kBitwiseOr: return {"BitwiseOr", DTypeSet::kInteger, false};
    case BinaryKind::kBitwiseXor: return {"BitwiseXor", DTypeSet::kInteger, false};
  }
  return {"", DTypeSet::kBool, true};
}

// Minimum and Maximum propagate NaN, as ONNX's Min and Max do (unlike std::fmin/fmax, which
// prefer the number): if x is NaN it is taken, and if y is NaN every comparison with it is
// false, so y is taken. Written as selects, which vectorise.
template <BinaryKind K, typename T>
auto ApplyBinary(T x, T y) {
  if constexpr (K == BinaryKind::kPow) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(std::pow(x, y));
    } else {
      // Integers: exact, wrapping as the products of Mul do; a negative exponent gives the
      // integer part of x^y (0 unless x is 1 or -1).
      using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      if constexpr (std::is_signed_v<T>) {
        if (y < 0) return static_cast<T>(x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0);
      }
      U result = 1, base = static_cast<U>(x);
      for (T e = y; e > 0; e >>= 1) {
        if (e & 1) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
      }
      return static_cast<T>(result);
    }
  }
  if constexpr (K == BinaryKind::kMinimum || K == BinaryKind::kMaximum) {
    const bool take_x = K == BinaryKind::kMinimum ? x < y : x > y;
    if constexpr (std::is_floating_point_v<T>) return (take_x || std::isnan(x)) ? x : y;
    else return take_x ? x : y;
  }
  if constexpr (K == BinaryKind::kEqual) return x == y;
  if constexpr (K == BinaryKind::kLess) return x < y;
  if constexpr (K == BinaryKind::kGreater) return x > y;
  if constexpr (K == BinaryKind::kLessEqual) return x <= y;
  if constexpr (K == BinaryKind::kGreaterEqual) return x >= y;
  if constexpr (K == BinaryKind::kAnd) return x && y;
  if constexpr (K == BinaryKind::kOr) return x || y;
  if constexpr (K == BinaryKind::kXor) return x != y;
  if constexpr (K == BinaryKind::kBitwiseAnd) return static_cast<T>(x & y);
  if constexpr (K == BinaryKind::kBitwiseOr) return static_cast<T>(x | y);
  if constexpr (K == BinaryKind::kBitwiseXor) return static_cast<T>(x ^ y);
}

// The dtype checks and the broadcast, shared by inference and the kernel (which re-derives
// the shape from the actual inputs: inference may have passed with -1 dimensions).
template <BinaryKind K>
StatusOr<TensorSpec> BinaryOutput(const TensorSpec& a, const TensorSpec& b) {
  constexpr BinaryInfo info = Info(K);
  LS_RETURN_IF_ERROR(CheckSameDType(info.name, a.dtype, b.dtype));
  LS_RETURN_IF_ERROR(CheckDTypeIn(info.name, a.dtype, info.dtypes));
  LS_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(info.name, a.shape, b.shape));
  return TensorSpec{info.bool_output ? DType::kBool : a.dtype, shape};
}

template <BinaryKind K>
StatusOr<std::vector<TensorSpec>> InferBinary(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(Info(K).name, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(TensorSpec out, BinaryOutput<K>(ctx.inputs[0], ctx.inputs[1]));
  return std::vector<TensorSpec>{out};
}

template <BinaryKind K, typename T>
Status BinaryKernelTyped(KernelContext& ctx, const TensorSpec& spec) {
  using Out = std::conditional_t<Info(K).bool_output, bool, T>;
  LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, spec.dtype, spec.shape));
  BroadcastMap2<T, T, Out>(ctx.pool(), ctx.input(0), ctx.input(1), *out,
                           [](T x, T y) -> Out { return ApplyBinary<K, T>(x, y); });
  return Status::Ok();
}

template <BinaryKind K>
Status BinaryKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(TensorSpec spec, BinaryOutput<K>({a.dtype(), a.shape()}, {b.dtype(), b.shape()}));
  return DispatchDTypeIn<Info(K).dtypes>(a.dtype(), [&](auto t) {
    return BinaryKernelTyped<K, decltype(t)>(ctx, spec);
  });
}

template <BinaryKind K>
OpDef BinaryDef() {
  return SimpleOpDef(std::string(Info(K).name), 2, InferBinary<K>, BinaryKernel<K>);
}

// ---- Where(condition, x, y) = condition ? x : y, the three broadcast together ----

StatusOr<TensorSpec> WhereOutput(const TensorSpec& condition, const TensorSpec& x, const TensorSpec& y) {
  LS_RETURN_IF_ERROR(CheckDType("Where", "condition", condition.dtype, DType::kBool));
  if (x.dtype != y.dtype) {
    return InvalidArgument("Where: x and y must have the same dtype, got " + Str(DTypeName(x.dtype)) + " and " +
                           Str(DTypeName(y.dtype)));
  }
  LS_RETURN_IF_ERROR(CheckDTypeIn("Where", x.dtype, DTypeSet::kNonString));
  LS_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes3("Where", condition.shape, x.shape, y.shape));
  return TensorSpec{x.dtype, shape};
}

StatusOr<std::vector<TensorSpec>> InferWhere(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Where", ctx.inputs.size(), 3, 3));
  LS_ASSIGN_OR_RETURN(TensorSpec out, WhereOutput(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]));
  return std::vector<TensorSpec>{out};
}

// Elements are copied, never computed with, so every dtype selects bit for bit.
Status WhereKernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  LS_ASSIGN_OR_RETURN(TensorSpec spec,
                      WhereOutput({c.dtype(), c.shape()}, {x.dtype(), x.shape()}, {y.dtype(), y.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, spec.dtype, spec.shape));
  return DispatchDTypeIn<DTypeSet::kNonString>(x.dtype(), [&](auto t) {
    using T = decltype(t);
    BroadcastMap3<bool, T, T, T>(ctx.pool(), c, x, y, *out, [](bool take_x, T vx, T vy) { return take_x ? vx : vy; });
    return Status::Ok();
  });
}

// ---- IsNaN(x), IsInf(x; detect_negative = true, detect_positive = true) -> bool ----

template <bool kInf>
StatusOr<std::vector<TensorSpec>> InferIsSpecial(const ShapeInferenceContext& ctx) {
  const char* name = kInf ? "IsInf" : "IsNaN";
  LS_RETURN_IF_ERROR(CheckInputCount(name, ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckDTypeIn(name, ctx.inputs[0].dtype, DTypeSet::kReal));
  return Single(DType::kBool, ctx.inputs[0].shape);
}

template <bool kInf>
Status IsSpecialKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckDTypeIn(kInf ? "IsInf" : "IsNaN", x.dtype(), DTypeSet::kReal));
  LS_ASSIGN_OR_RETURN(bool negative, IntFlag(ctx.attrs(), "detect_negative", true));
  LS_ASSIGN_OR_RETURN(bool positive, IntFlag(ctx.attrs(), "detect_positive", true));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kBool, x.shape()));
  bool* po = out->mutable_data<bool>().data();
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>().data();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      po[i] = kInf ? std::isinf(px[i]) && (px[i] > 0 ? positive : negative) : std::isnan(px[i]);
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& registry) {
  (void)registry.Register(UnaryDef<UnaryOp::kSqrt>());
  (void)registry.Register(UnaryDef<UnaryOp::kExp>());
  (void)registry.Register(UnaryDef<UnaryOp::kLog>());
  (void)registry.Register(UnaryDef<UnaryOp::kReciprocal>());
  (void)registry.Register(UnaryDef<UnaryOp::kFloor>());
  (void)registry.Register(UnaryDef<UnaryOp::kCeil>());
  (void)registry.Register(UnaryDef<UnaryOp::kErf>());
  (void)registry.Register(UnaryDef<UnaryOp::kSoftplus>());
  (void)registry.Register(UnaryDef<UnaryOp::kSin>());
  (void)registry.Register(UnaryDef<UnaryOp::kCos>());
  (void)registry.Register(UnaryDef<UnaryOp::kTan>());
  (void)registry.Register(UnaryDef<UnaryOp::kAsin>());
  (void)registry.Register(UnaryDef<UnaryOp::kAcos>());
  (void)registry.Register(UnaryDef<UnaryOp::kAtan>());
  (void)registry.Register(UnaryDef<UnaryOp::kSinh>());
  (void)registry.Register(UnaryDef<UnaryOp::kCosh>());
  (void)registry.Register(UnaryDef<UnaryOp::kAsinh>());
  (void)registry.Register(UnaryDef<UnaryOp::kAcosh>());
  (void)registry.Register(UnaryDef<UnaryOp::kAtanh>());
  (void)registry.Register(UnaryDef<UnaryOp::kSoftsign>());
  (void)registry.Register(UnaryDef<UnaryOp::kNeg>());
  (void)registry.Register(UnaryDef<UnaryOp::kAbs>());
  (void)registry.Register(UnaryDef<UnaryOp::kSign>());
  (void)registry.Register(UnaryDef<UnaryOp::kLeakyRelu>());
  (void)registry.Register(UnaryDef<UnaryOp::kHardSigmoid>());
  (void)registry.Register(UnaryDef<UnaryOp::kHardSwish>());
  (void)registry.Register(UnaryDef<UnaryOp::kThresholdedRelu>());
  (void)registry.Register(UnaryDef<UnaryOp::kClip>());
  (void)registry.Register(UnaryDef<UnaryOp::kNot>());
  (void)registry.Register(UnaryDef<UnaryOp::kRound>());
  (void)registry.Register(UnaryDef<UnaryOp::kShrink>());
  (void)registry.Register(UnaryDef<UnaryOp::kCelu>());
  (void)registry.Register(UnaryDef<UnaryOp::kMish>());
  (void)registry.Register(SimpleOpDef("IsNaN", 1, InferIsSpecial<false>, IsSpecialKernel<false>));
  (void)registry.Register(SimpleOpDef("IsInf", 1, InferIsSpecial<true>, IsSpecialKernel<true>));
  (void)registry.Register(BinaryDef<BinaryKind::kPow>());
  (void)registry.Register(BinaryDef<BinaryKind::kMinimum>());
  (void)registry.Register(BinaryDef<BinaryKind::kMaximum>());
  (void)registry.Register(BinaryDef<BinaryKind::kEqual>());
  (void)registry.Register(BinaryDef<BinaryKind::kLess>());
  (void)registry.Register(BinaryDef<BinaryKind::kGreater>());
  (void)registry.Register(BinaryDef<BinaryKind::kLessEqual>());
  (void)registry.Register(BinaryDef<BinaryKind::kGreaterEqual>());
  (void)registry.Register(BinaryDef<BinaryKind::kAnd>());
  (void)registry.Register(BinaryDef<BinaryKind::kBitwiseAnd>());
  (void)registry.Register(BinaryDef<BinaryKind::kBitwiseOr>());
  (void)registry.Register(BinaryDef<BinaryKind::kBitwiseXor>());
  (void)registry.Register(BinaryDef<BinaryKind::kOr>());
  (void)registry.Register(BinaryDef<BinaryKind::kXor>());
  (void)registry.Register(SimpleOpDef("Where", 3, InferWhere, WhereKernel));
}

}  // namespace lockstep
