// Element-wise arithmetic with numpy broadcasting, BiasAdd and Normalize.
//
// Broadcasting plan: the output shape is walked once, size-1 output dimensions are dropped and
// neighbouring dimensions in which every input is either broadcast or not are merged. What is
// left is an outer loop (odometer over the merged dimensions) around one inner row in which
// each input is either contiguous or a single repeated value, which is the shape the compiler
// vectorises. [N, C] + [C] becomes N rows of (contiguous, contiguous); x * scalar is one row.
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

template <int N>
struct BroadcastPlan {
  int rank = 0;  // at least 1
  std::array<int64_t, Shape::kMaxRank> dims{};
  // strides[k][d]: elements to step input k by along merged dimension d (0 when broadcast).
  std::array<std::array<int64_t, Shape::kMaxRank>, N> strides{};
};

// `out` is the broadcast of `ins`, all fully defined, with at least one element.
template <int N>
BroadcastPlan<N> MakePlan(const Shape& out, const std::array<const Shape*, N>& ins) {
  BroadcastPlan<N> plan;
  std::array<std::array<bool, Shape::kMaxRank>, N> bcast{};
  const int r = out.rank();
  for (int d = 0; d < r; ++d) {
    if (out.dim(d) == 1) continue;
    std::array<bool, N> flags{};
    for (int k = 0; k < N; ++k) {
      const int i = d - (r - ins[k]->rank());
      flags[k] = i < 0 || ins[k]->dim(i) == 1;
    }
    bool same = plan.rank > 0;
    for (int k = 0; k < N && same; ++k) same = bcast[k][plan.rank - 1] == flags[k];
    if (same) {
      plan.dims[plan.rank - 1] *= out.dim(d);
    } else {
      plan.dims[plan.rank] = out.dim(d);
      for (int k = 0; k < N; ++k) bcast[k][plan.rank] = flags[k];
      ++plan.rank;
    }
  }
  if (plan.rank == 0) {  // one element: every stride is irrelevant
    plan.rank = 1;
    plan.dims[0] = 1;
    return plan;
  }
  for (int k = 0; k < N; ++k) {
    int64_t step = 1;
    for (int d = plan.rank - 1; d >= 0; --d) {
      plan.strides[k][d] = bcast[k][d] ? 0 : step;
      if (!bcast[k][d]) step *= plan.dims[d];
    }
  }
  return plan;
}

// Calls row(out_offset, in_offsets, length) for every innermost row, rows split over the pool.
template <int N, typename RowFn>
void RunPlan(const BroadcastPlan<N>& plan, ThreadPool& pool, const RowFn& row) {
  const int outer_rank = plan.rank - 1;
  const int64_t inner = plan.dims[outer_rank];
  int64_t outer = 1;
  for (int d = 0; d < outer_rank; ++d) outer *= plan.dims[d];
  auto rows = [&](int64_t begin, int64_t end) {
    std::array<int64_t, Shape::kMaxRank> index{};
    std::array<int64_t, N> offsets{};
    int64_t rest = begin;
    for (int d = outer_rank - 1; d >= 0; --d) {
      index[d] = rest % plan.dims[d];
      rest /= plan.dims[d];
      for (int k = 0; k < N; ++k) offsets[k] += index[d] * plan.strides[k][d];
    }
    for (int64_t o = begin; o < end; ++o) {
      row(o * inner, offsets, inner);
      for (int d = outer_rank - 1; d >= 0; --d) {  // odometer step
        for (int k = 0; k < N; ++k) offsets[k] += plan.strides[k][d];
        if (++index[d] < plan.dims[d]) break;
        for (int k = 0; k < N; ++k) offsets[k] -= plan.dims[d] * plan.strides[k][d];
        index[d] = 0;
      }
    }
  };
  pool.ParallelFor(outer, std::max<int64_t>(1, kElementGrain / inner), rows);
}

// One row of out[i] = f(a[i], b[i]), with each side either contiguous or repeated; separate
// loops so each is a simple vectorisable form.
template <typename T, typename F>
void BinaryRow(const T* a, bool a_step, const T* b, bool b_step, T* out, int64_t n, F f) {
  if (a_step && b_step) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (a_step) {
    const T y = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], y);
  } else if (b_step) {
    const T x = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(x, b[i]);
  } else {
    const T v = f(*a, *b);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

constexpr std::string_view BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "Add";
    case BinaryOp::kSub: return "Sub";
    case BinaryOp::kMul: return "Mul";
    case BinaryOp::kDiv: return "Div";
  }
  return "";
}

// Integer arithmetic wraps on overflow (two's complement, as TensorFlow on every platform it
// runs on) instead of being undefined behaviour; division truncates toward zero.
template <BinaryOp Op, typename T>
T Apply(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if constexpr (Op == BinaryOp::kAdd) return x + y;
    if constexpr (Op == BinaryOp::kSub) return x - y;
    if constexpr (Op == BinaryOp::kMul) return x * y;
    if constexpr (Op == BinaryOp::kDiv) return x / y;
  } else {
    using U = std::make_unsigned_t<T>;
    const U ux = static_cast<U>(x), uy = static_cast<U>(y);
    if constexpr (Op == BinaryOp::kAdd) return static_cast<T>(ux + uy);
    if constexpr (Op == BinaryOp::kSub) return static_cast<T>(ux - uy);
    if constexpr (Op == BinaryOp::kMul) return static_cast<T>(ux * uy);
    // Zero divisors were rejected before; min / -1 overflows, and wraps to min.
    if constexpr (Op == BinaryOp::kDiv) return y == -1 ? static_cast<T>(U{0} - ux) : x / y;
  }
}

bool IsArithmeticDType(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kInt32 || d == DType::kInt64;
}

StatusOr<Shape> BinaryShape(std::string_view name, const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype) {
    return InvalidArgument(Str(name) + ": inputs must have the same dtype, got " +
                           Str(DTypeName(a.dtype)) + " and " + Str(DTypeName(b.dtype)));
  }
  if (!IsArithmeticDType(a.dtype)) {
    return InvalidArgument(Str(name) + ": dtype " + Str(DTypeName(a.dtype)) +
                           " is not supported (float32, float64, int32, int64)");
  }
  return BroadcastShapes(name, a.shape, b.shape);
}

template <BinaryOp Op>
StatusOr<std::vector<TensorSpec>> InferBinary(const ShapeInferenceContext& ctx) {
  constexpr std::string_view name = BinaryOpName(Op);
  LS_RETURN_IF_ERROR(CheckInputCount(name, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(Shape out, BinaryShape(name, ctx.inputs[0], ctx.inputs[1]));
  return Single(ctx.inputs[0].dtype, out);
}

template <BinaryOp Op, typename T>
Status BinaryKernelTyped(KernelContext& ctx, const Shape& out_shape) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if constexpr (Op == BinaryOp::kDiv && std::is_integral_v<T>) {
    for (T v : b.data<T>()) {
      if (v == 0) return InvalidArgument("Div: integer division by zero");
    }
  }
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, a.dtype(), out_shape));
  Tensor& out = *out_ptr;
  if (out.num_elements() == 0) return Status::Ok();
  const auto plan = MakePlan<2>(out_shape, {&a.shape(), &b.shape()});
  const bool a_step = plan.strides[0][plan.rank - 1] != 0;
  const bool b_step = plan.strides[1][plan.rank - 1] != 0;
  const T* pa = a.data<T>().data();
  const T* pb = b.data<T>().data();
  T* po = out.mutable_data<T>().data();
  RunPlan<2>(plan, ctx.pool(), [&](int64_t o, const std::array<int64_t, 2>& in, int64_t n) {
    BinaryRow(pa + in[0], a_step, pb + in[1], b_step, po + o, n,
              [](T x, T y) { return Apply<Op, T>(x, y); });
  });
  return Status::Ok();
}

template <BinaryOp Op>
Status BinaryKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  LS_ASSIGN_OR_RETURN(Shape out_shape, BinaryShape(BinaryOpName(Op), {a.dtype(), a.shape()},
                                                   {b.dtype(), b.shape()}));
  switch (a.dtype()) {
    case DType::kFloat32: return BinaryKernelTyped<Op, float>(ctx, out_shape);
    case DType::kFloat64: return BinaryKernelTyped<Op, double>(ctx, out_shape);
    case DType::kInt32: return BinaryKernelTyped<Op, int32_t>(ctx, out_shape);
    case DType::kInt64: return BinaryKernelTyped<Op, int64_t>(ctx, out_shape);
    default: return Internal("unreachable dtype");
  }
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
  LS_ASSIGN_OR_RETURN(Shape xm, BroadcastShapes("Normalize", x, mean));
  return BroadcastShapes("Normalize", xm, std);
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

template <bool X, bool M, bool S>
void NormalizeRow(const float* x, const float* m, const float* s, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = (x[X ? i : 0] - m[M ? i : 0]) / s[S ? i : 0];
}

Status NormalizeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& mean = ctx.input(1);
  const Tensor& std = ctx.input(2);
  LS_ASSIGN_OR_RETURN(Shape shape, NormalizeShape(x.shape(), mean.shape(), std.shape()));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, DType::kFloat32, shape));
  Tensor& out = *out_ptr;
  if (out.num_elements() == 0) return Status::Ok();
  const auto plan = MakePlan<3>(shape, {&x.shape(), &mean.shape(), &std.shape()});
  const int last = plan.rank - 1;
  const int pattern = (plan.strides[0][last] != 0 ? 4 : 0) + (plan.strides[1][last] != 0 ? 2 : 0) +
                      (plan.strides[2][last] != 0 ? 1 : 0);
  using RowFn = void (*)(const float*, const float*, const float*, float*, int64_t);
  static constexpr RowFn kRows[8] = {
      NormalizeRow<false, false, false>, NormalizeRow<false, false, true>,
      NormalizeRow<false, true, false>,  NormalizeRow<false, true, true>,
      NormalizeRow<true, false, false>,  NormalizeRow<true, false, true>,
      NormalizeRow<true, true, false>,   NormalizeRow<true, true, true>};
  const RowFn row = kRows[pattern];
  const float* px = x.data<float>().data();
  const float* pm = mean.data<float>().data();
  const float* ps = std.data<float>().data();
  float* po = out.mutable_data<float>().data();
  RunPlan<3>(plan, ctx.pool(), [&](int64_t o, const std::array<int64_t, 3>& in, int64_t n) {
    row(px + in[0], pm + in[1], ps + in[2], po + o, n);
  });
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
  def.gradient = BinaryGrad<Op>;
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
