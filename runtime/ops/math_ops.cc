// Element-wise arithmetic with numpy broadcasting (runtime/ops/broadcast.h): Add, Sub, Mul,
// Div, the remainders Mod (the sign of the divisor, as Python's %) and FMod (the sign of the
// dividend, as C's fmod and %), and ShiftLeft and ShiftRight of unsigned integers (ONNX's
// BitShift); BiasAdd and Normalize.
#include <cmath>
#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/broadcast.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMod, kFMod, kShiftLeft, kShiftRight };

constexpr std::string_view BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "Add";
    case BinaryOp::kSub: return "Sub";
    case BinaryOp::kMul: return "Mul";
    case BinaryOp::kDiv: return "Div";
    case BinaryOp::kMod: return "Mod";
    case BinaryOp::kFMod: return "FMod";
    case BinaryOp::kShiftLeft: return "ShiftLeft";
    case BinaryOp::kShiftRight: return "ShiftRight";
  }
  return "";
}

constexpr bool IsShift(BinaryOp op) { return op == BinaryOp::kShiftLeft || op == BinaryOp::kShiftRight; }

template <BinaryOp Op>
constexpr DTypeSet kBinaryDTypes = IsShift(Op) ? DTypeSet::kUnsigned : DTypeSet::kArithmetic;

// Integer Add, Sub and Mul wrap on overflow (two's complement, as TensorFlow on every platform
// it runs on) instead of being undefined behaviour; division truncates toward zero (C, and
// onnxruntime).
template <BinaryOp Op, typename T>
T Apply(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if constexpr (Op == BinaryOp::kAdd) return x + y;
    if constexpr (Op == BinaryOp::kSub) return x - y;
    if constexpr (Op == BinaryOp::kMul) return x * y;
    if constexpr (Op == BinaryOp::kDiv) return x / y;
    if constexpr (Op == BinaryOp::kFMod) return std::fmod(x, y);
    if constexpr (Op == BinaryOp::kMod) {
      const T r = std::fmod(x, y);
      return r != 0 && (r < 0) != (y < 0) ? r + y : r;
    }
  } else {
    // Unsigned arithmetic at least as wide as unsigned int: uint16_t operands would otherwise
    // promote to int, whose product can overflow (undefined).
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    const U ux = static_cast<U>(x), uy = static_cast<U>(y);
    if constexpr (Op == BinaryOp::kAdd) return static_cast<T>(ux + uy);
    if constexpr (Op == BinaryOp::kSub) return static_cast<T>(ux - uy);
    if constexpr (Op == BinaryOp::kMul) return static_cast<T>(ux * uy);
    if constexpr (std::is_unsigned_v<T>) {
      // A shift by the width or more (undefined in C) empties the value.
      if constexpr (Op == BinaryOp::kShiftLeft) return y >= sizeof(T) * 8 ? T{0} : static_cast<T>(ux << uy);
      if constexpr (Op == BinaryOp::kShiftRight) return y >= sizeof(T) * 8 ? T{0} : static_cast<T>(x >> y);
      // Zero divisors are rejected before; unsigned quotients and remainders are C's.
      if constexpr (Op == BinaryOp::kDiv) return static_cast<T>(x / y);
      if constexpr (Op == BinaryOp::kFMod || Op == BinaryOp::kMod) return static_cast<T>(x % y);
    } else {
      // Zero divisors are rejected before; min / -1 (also rejected) would trap, so it wraps.
      if constexpr (Op == BinaryOp::kDiv) return y == -1 ? static_cast<T>(U{0} - ux) : static_cast<T>(x / y);
      // min % -1 is 0, though C's % would trap computing it.
      if constexpr (Op == BinaryOp::kFMod) return y == -1 ? T{0} : static_cast<T>(x % y);
      if constexpr (Op == BinaryOp::kMod) {
        const T r = y == -1 ? T{0} : static_cast<T>(x % y);
        return r != 0 && (r < 0) != (y < 0) ? static_cast<T>(r + y) : r;
      }
    }
  }
}

StatusOr<Shape> BinaryShape(std::string_view name, DTypeSet dtypes, const TensorSpec& a, const TensorSpec& b) {
  LS_RETURN_IF_ERROR(CheckSameDType(name, a.dtype, b.dtype));
  LS_RETURN_IF_ERROR(CheckDTypeIn(name, a.dtype, dtypes));
  return BroadcastShapes(name, a.shape, b.shape);
}

template <BinaryOp Op>
StatusOr<std::vector<TensorSpec>> InferBinary(const ShapeInferenceContext& ctx) {
  constexpr std::string_view name = BinaryOpName(Op);
  LS_RETURN_IF_ERROR(CheckInputCount(name, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Shape out, BinaryShape(name, kBinaryDTypes<Op>, ctx.inputs[0], ctx.inputs[1]));
  return Single(ctx.inputs[0].dtype, out);
}

// Integer Div refuses the two quotients C leaves undefined, x / 0 and min / -1, rather than
// wrapping or trapping: an exported model that divides by zero is broken, and saying so beats
// a silently wrong shape computation. Zero divisors are found before anything is allocated
// (every divisor element reaches the output unless it is empty); min / -1 depends on which
// elements meet, so the rows flag it as they go.
// The remainders refuse a zero divisor in the same way.
template <typename T>
Status CheckNoZeroDivisor(std::string_view op, const Tensor& b) {
  for (T v : b.data<T>()) {
    if (v == 0) return InvalidArgument(Str(op) + ": integer division by zero");
  }
  return Status::Ok();
}

template <typename T>
Status IntegerDivKernel(KernelContext& ctx, const Shape& out_shape) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckNoZeroDivisor<T>("Div", b));
  LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, a.dtype(), out_shape));
  constexpr T kMin = std::numeric_limits<T>::min();
  std::atomic<bool> overflow{false};
  BroadcastMap2<T, T, T>(ctx.pool(), a, b, *out, [&overflow](T x, T y) {
    if constexpr (std::is_signed_v<T>) {
      if (y == -1 && x == kMin) overflow.store(true, std::memory_order_relaxed);
    }
    return Apply<BinaryOp::kDiv, T>(x, y);
  });
  if (overflow.load(std::memory_order_relaxed)) {
    return InvalidArgument("Div: integer overflow (" + std::to_string(kMin) + " / -1)");
  }
  return Status::Ok();
}

template <BinaryOp Op, typename T>
Status BinaryKernelTyped(KernelContext& ctx, const Shape& out_shape) {
  if constexpr (Op == BinaryOp::kDiv && std::is_integral_v<T>) {
    return IntegerDivKernel<T>(ctx, out_shape);
  } else {
    if constexpr ((Op == BinaryOp::kMod || Op == BinaryOp::kFMod) && std::is_integral_v<T>) {
      LS_RETURN_IF_ERROR(CheckNoZeroDivisor<T>(BinaryOpName(Op), ctx.input(1)));
    }
    LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, ctx.input(0).dtype(), out_shape));
    BroadcastMap2<T, T, T>(ctx.pool(), ctx.input(0), ctx.input(1), *out,
                           [](T x, T y) { return Apply<Op, T>(x, y); });
    return Status::Ok();
  }
}

template <BinaryOp Op>
Status BinaryKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Shape out_shape, BinaryShape(BinaryOpName(Op), kBinaryDTypes<Op>, {a.dtype(), a.shape()},
                                                   {b.dtype(), b.shape()}));
  return DispatchDTypeIn<kBinaryDTypes<Op>>(a.dtype(), [&](auto t) {
    return BinaryKernelTyped<Op, decltype(t)>(ctx, out_shape);
  });
}

// ---- BiasAdd(x [..., C], bias [C]) ----

StatusOr<Shape> BiasAddShape(const Shape& x, const Shape& bias) {
  if (x.rank() < 1) return InvalidArgument("BiasAdd: x must have rank >= 1, got a scalar");
  LS_RETURN_IF_ERROR(CheckRank("BiasAdd", "bias", bias, 1));
  int64_t c;
  if (!MergeDim(x.dim(x.rank() - 1), bias.dim(0), &c)) {
    return InvalidArgument("BiasAdd: bias length " + std::to_string(bias.dim(0)) +
                           " differs from the last dimension of x " + x.ToString());
  }
  Shape out = x;
  out.set_dim(x.rank() - 1, c);
  return out;
}

StatusOr<std::vector<TensorSpec>> InferBiasAdd(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("BiasAdd", ctx.inputs.size(), 2, 2));
  const DType dtype = ctx.inputs[0].dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  LS_RETURN_IF_ERROR(CheckDType("BiasAdd", "x", ctx.inputs[0].dtype, dtype));
  LS_RETURN_IF_ERROR(CheckDType("BiasAdd", "bias", ctx.inputs[1].dtype, dtype));
  LS_ASSIGN_OR_RETURN(Shape out, BiasAddShape(ctx.inputs[0].shape, ctx.inputs[1].shape));
  return Single(dtype, out);
}

// A plain x + bias per element: the same single rounding as the Gemm epilogue's bias step, so
// MatMul -> BiasAdd and FusedMatMul agree bit for bit.
template <typename T>
Status BiasAddKernelTyped(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Shape shape, BiasAddShape(x.shape(), bias.shape()));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, x.dtype(), shape));
  Tensor& out = *out_ptr;
  const int64_t c = bias.num_elements();
  if (out.num_elements() == 0) return Status::Ok();
  const T* px = x.data<T>().data();
  const T* pb = bias.data<T>().data();
  T* po = out.mutable_data<T>().data();
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = px + r * c;
      T* orow = po + r * c;
      for (int64_t j = 0; j < c; ++j) orow[j] = xr[j] + pb[j];
    }
  };
  ctx.pool().ParallelFor(out.num_elements() / c, std::max<int64_t>(1, kElementGrain / c), rows);
  return Status::Ok();
}

Status BiasAddKernel(KernelContext& ctx) {
  if (ctx.input(0).dtype() != ctx.input(1).dtype()) return InvalidArgument("BiasAdd: x and bias dtypes differ");
  return ctx.input(0).dtype() == DType::kFloat64 ? BiasAddKernelTyped<double>(ctx) : BiasAddKernelTyped<float>(ctx);
}

// ---- Normalize(x, mean, std) = (x - mean) / std ----

StatusOr<Shape> NormalizeShape(const Shape& x, const Shape& mean, const Shape& std) {
  return BroadcastShapes3("Normalize", x, mean, std);
}

StatusOr<std::vector<TensorSpec>> InferNormalize(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Normalize", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(CheckDType("Normalize", "x", ctx.inputs[0].dtype, DType::kFloat32));
  LS_RETURN_IF_ERROR(CheckDType("Normalize", "mean", ctx.inputs[1].dtype, DType::kFloat32));
  LS_RETURN_IF_ERROR(CheckDType("Normalize", "std", ctx.inputs[2].dtype, DType::kFloat32));
  LS_ASSIGN_OR_RETURN(
      Shape out, NormalizeShape(ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.inputs[2].shape));
  return Single(DType::kFloat32, out);
}

Status NormalizeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& mean = ctx.input(1);
  const Tensor& std = ctx.input(2);
  LS_ASSIGN_OR_RETURN(Shape shape, NormalizeShape(x.shape(), mean.shape(), std.shape()));
  LS_ASSIGN_OR_RETURN(Tensor* out, ctx.AllocateOutput(0, DType::kFloat32, shape));
  BroadcastMap3<float, float, float, float>(ctx.pool(), x, mean, std, *out,
                                            [](float v, float m, float s) { return (v - m) / s; });
  return Status::Ok();
}

template <BinaryOp Op>
Status BinaryGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const std::string& dy = g.output_grad(0);
  const std::string a = g.input(0), b = g.input(1);
  const DType dtype = g.output_spec(0).dtype;
  // Each side's gradient, then summed down to that side's shape where it was broadcast.
  std::string da, db;
  if constexpr (Op == BinaryOp::kAdd) {
    da = dy;
    db = dy;
  } else if constexpr (Op == BinaryOp::kSub) {
    da = dy;
    if (g.needs_input_grad(1)) db = g.Op("Mul", {dy, g.Scalar(dtype, -1.0)});
  } else if constexpr (Op == BinaryOp::kMul) {
    if (g.needs_input_grad(0)) da = g.Op("Mul", {dy, b});
    if (g.needs_input_grad(1)) db = g.Op("Mul", {dy, a});
  } else {
    if (g.needs_input_grad(0)) da = g.Op("Div", {dy, b});
    // d(a / b)/db = -(a / b) / b.
    if (g.needs_input_grad(1)) db = g.Op("Mul", {g.Op("Mul", {dy, g.Scalar(dtype, -1.0)}), g.Op("Div", {g.output(0), b})});
  }
  if (g.needs_input_grad(0)) g.SetInputGrad(0, g.Op("SumLike", {da, a}));
  if (g.needs_input_grad(1)) g.SetInputGrad(1, g.Op("SumLike", {db, b}));
  return Status::Ok();
}

template <BinaryOp Op>
OpDef BinaryDef() {
  OpDef def;
  def.name = std::string(BinaryOpName(Op));
  def.min_inputs = def.max_inputs = 2;
  def.infer = InferBinary<Op>;
  def.compute = BinaryKernel<Op>;
  if constexpr (Op != BinaryOp::kMod && Op != BinaryOp::kFMod && !IsShift(Op)) def.gradient = BinaryGrad<Op>;
  return def;
}

Status BiasAddGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  g.SetInputGrad(0, g.output_grad(0));
  if (g.needs_input_grad(1)) g.SetInputGrad(1, g.Op("SumLike", {g.output_grad(0), g.input(1)}));
  return Status::Ok();
}

}  // namespace

void RegisterMathOps(OpRegistry& registry) {
  (void)registry.Register(BinaryDef<BinaryOp::kAdd>());
  (void)registry.Register(BinaryDef<BinaryOp::kSub>());
  (void)registry.Register(BinaryDef<BinaryOp::kMul>());
  (void)registry.Register(BinaryDef<BinaryOp::kDiv>());
  (void)registry.Register(BinaryDef<BinaryOp::kMod>());
  (void)registry.Register(BinaryDef<BinaryOp::kFMod>());
  (void)registry.Register(BinaryDef<BinaryOp::kShiftLeft>());
  (void)registry.Register(BinaryDef<BinaryOp::kShiftRight>());

  OpDef bias_add;
  bias_add.name = "BiasAdd";
  bias_add.min_inputs = bias_add.max_inputs = 2;
  bias_add.infer = InferBiasAdd;
  bias_add.compute = BiasAddKernel;
  bias_add.gradient = BiasAddGrad;
  (void)registry.Register(std::move(bias_add));

  OpDef normalize;
  normalize.name = "Normalize";
  normalize.min_inputs = normalize.max_inputs = 3;
  normalize.infer = InferNormalize;
  normalize.compute = NormalizeKernel;
  (void)registry.Register(std::move(normalize));
}

}  // namespace lockstep
