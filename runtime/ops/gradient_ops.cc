// The ops backward graphs are made of (runtime/autodiff): reductions that undo broadcasting
// (Sum, SumLike, BroadcastLike) and the activations' derivatives. float32 and float64 (the
// latter for gradient checks). Sums run in a fixed order, so a gradient is the same bits on
// every run whatever the thread count.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "runtime/activation.h"
#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/reduction.h"

namespace lockstep {
namespace {

// Strides (in elements) of a row-major shape.
std::array<int64_t, Shape::kMaxRank> Strides(const Shape& s) {
  std::array<int64_t, Shape::kMaxRank> st{};
  int64_t step = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    st[static_cast<size_t>(d)] = step;
    step *= s.dim(d);
  }
  return st;
}

// For each dimension of `big`, the stride of `small` (right-aligned, numpy style) along it, 0
// where `small` is broadcast. Fails unless `small` broadcasts to `big`.
StatusOr<std::array<int64_t, Shape::kMaxRank>> BroadcastStrides(std::string_view op, const Shape& small,
                                                                const Shape& big) {
  std::array<int64_t, Shape::kMaxRank> out{};
  if (small.rank() > big.rank()) {
    return InvalidArgument(Str(op) + ": " + small.ToString() + " does not broadcast to " + big.ToString());
  }
  const auto st = Strides(small);
  const int offset = big.rank() - small.rank();
  for (int d = 0; d < big.rank(); ++d) {
    const int sd = d - offset;
    if (sd < 0) continue;
    if (small.dim(sd) == big.dim(d)) {
      out[static_cast<size_t>(d)] = small.dim(sd) == 1 ? 0 : st[static_cast<size_t>(sd)];
    } else if (small.dim(sd) != 1) {
      return InvalidArgument(Str(op) + ": " + small.ToString() + " does not broadcast to " + big.ToString());
    }
  }
  return out;
}

// Calls fn(big_index, small_index) for every element of `big`, in row-major order.
template <typename Fn>
void ForEachBroadcast(const Shape& big, const std::array<int64_t, Shape::kMaxRank>& small_strides, Fn fn) {
  const int64_t n = big.num_elements();
  if (n == 0) return;
  std::array<int64_t, Shape::kMaxRank> index{};
  int64_t small = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, small);
    for (int d = big.rank() - 1; d >= 0; --d) {
      const auto ud = static_cast<size_t>(d);
      small += small_strides[ud];
      if (++index[ud] < big.dim(d)) break;
      small -= big.dim(d) * small_strides[ud];
      index[ud] = 0;
    }
  }
}

// ---- SumLike(x, like): x summed down to like's shape (the gradient of a broadcast) ----

StatusOr<std::vector<TensorSpec>> InferSumLike(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("SumLike", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckReal("SumLike", "x", ctx.inputs[0].dtype));
  return Single(ctx.inputs[0].dtype, ctx.inputs[1].shape);
}

// x summed over the dimensions where `kept` (x's rank or less, numpy-aligned) has size 1 or
// none, into an output of shape `out` (kept's element count, any layout of it).
// x's dimensions, size-1 ones dropped, as outer kept x middle summed x inner kept, when they
// fall in (at most) those three runs; nullopt otherwise.
struct SumRuns {
  int64_t outer = 1, middle = 1, inner = 1;
};
std::optional<SumRuns> ThreeRuns(const Shape& x, const std::array<int64_t, Shape::kMaxRank>& strides) {
  SumRuns runs;
  int phase = 0;  // 0: outer kept, 1: middle summed, 2: inner kept
  for (int d = 0; d < x.rank(); ++d) {
    if (x.dim(d) == 1) continue;
    const bool summed = strides[static_cast<size_t>(d)] == 0;
    if (phase == 0 && summed) phase = 1;
    if (phase == 1 && !summed) phase = 2;
    if (phase == 2 && summed) return std::nullopt;
    (phase == 0 ? runs.outer : phase == 1 ? runs.middle : runs.inner) *= x.dim(d);
  }
  return runs;
}

// x summed over the dimensions where `kept` (x's rank or less, numpy-aligned) has size 1 or
// none, into an output of shape `out` (kept's element count, any layout of it). Each output
// sums its terms in the order they lie in x, whichever loop runs: the same bits.
StatusOr<Tensor*> SumDown(KernelContext& ctx, std::string_view op, const Tensor& x, const Shape& kept,
                          const Shape& out_shape) {
  LS_ASSIGN_OR_RETURN(auto strides, BroadcastStrides(op, kept, x.shape()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  // The common cases, a sum over leading dimensions ([rows, ...] to [...], as a bias's
  // gradient), over middle ones (NHWC's global pooling, [N, H * W, C] to [N, C]) or trailing
  // ones (NCHW's): whole rows added in order, vectorised over the kept inner run.
  const std::optional<SumRuns> runs = ThreeRuns(x.shape(), strides);
  LS_RETURN_IF_ERROR(DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* __restrict po = out->mutable_data<T>().data();
    const int64_t width = out->num_elements();
    const T* px = x.data<T>().data();
    if (runs && x.num_elements() > 0 && runs->outer * runs->inner == width) {
      const int64_t inner = runs->inner, middle = runs->middle;
      if (inner == 1) {
        for (int64_t o = 0; o < runs->outer; ++o) {
          T sum = T(0);
          for (int64_t m = 0; m < middle; ++m) sum += px[o * middle + m];
          po[o] = sum;
        }
        return Status::Ok();
      }
      // Columns [j0, j0 + 64) of one outer index at a time (then 32, 16, and the rest), their
      // sums kept in a local array (registers) down all the middle rows rather than loaded and
      // stored each row; in parallel when the sum is large (a batch's global pooling).
      constexpr int64_t kChunk = 64;
      const int64_t chunks = (inner + kChunk - 1) / kChunk;
      auto columns = [&]<int64_t kWidth>(const T* from, T* to) {
        T acc[kWidth] = {};
        for (int64_t m = 0; m < middle; ++m) {
          for (int64_t j = 0; j < kWidth; ++j) acc[j] += from[m * inner + j];
        }
        std::copy(acc, acc + kWidth, to);
      };
      auto sum_chunks = [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          const int64_t o = c / chunks, j0 = c % chunks * kChunk;
          const T* from = px + o * middle * inner + j0;
          T* to = po + o * inner + j0;
          const int64_t len = std::min(kChunk, inner - j0);
          int64_t j = 0;
          if (len == 64) {
            columns.template operator()<64>(from, to);
            continue;
          }
          if (len - j >= 32) {
            columns.template operator()<32>(from + j, to + j);
            j += 32;
          }
          if (len - j >= 16) {
            columns.template operator()<16>(from + j, to + j);
            j += 16;
          }
          for (; j < len; ++j) {
            T sum = T(0);
            for (int64_t m = 0; m < middle; ++m) sum += from[m * inner + j];
            to[j] = sum;
          }
        }
      };
      ctx.pool().ParallelFor(runs->outer * chunks, std::max<int64_t>(1, kElementGrain / (middle * kChunk)), sum_chunks);
      return Status::Ok();
    }
    std::fill(po, po + width, T(0));
    ForEachBroadcast(x.shape(), strides, [&](int64_t i, int64_t o) { po[o] += px[i]; });
    return Status::Ok();
  }));
  return out;
}

Status SumLikeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& target = ctx.input(1).shape();
  if (x.shape() == target) {
    // Nothing was broadcast: the gradient passes through, copied rather than aliased so that
    // the output has an arena buffer of its own whichever case a run takes (an aliasing op
    // gets none, and would have to allocate whenever it does not alias).
    LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), target));
    if (x.byte_size() > 0) std::memcpy(out->mutable_raw_data(), x.raw_data(), x.byte_size());
    return Status::Ok();
  }
  return SumDown(ctx, "SumLike", x, target, target).status();
}

// ---- BroadcastLike(x, like): x broadcast to like's shape (the gradient of a sum) ----
//
// Any dtype: serving graphs also use it to repeat a row of labels for every example.

StatusOr<std::vector<TensorSpec>> InferBroadcastLike(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("BroadcastLike", ctx.inputs.size(), 2, 2));
  return Single(ctx.inputs[0].dtype, ctx.inputs[1].shape);
}

// T is the element type, or for numbers any type of the same size (values are copied bit for
// bit).
template <typename T>
void BroadcastCopy(const Tensor& x, const Shape& target, const std::array<int64_t, Shape::kMaxRank>& strides,
                   Tensor& out) {
  T* po = static_cast<T*>(out.mutable_raw_data());
  const T* px = static_cast<const T*>(x.raw_data());
  ForEachBroadcast(target, strides, [&](int64_t o, int64_t i) { po[o] = px[i]; });
}

Status BroadcastLikeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& target = ctx.input(1).shape();
  LS_ASSIGN_OR_RETURN(auto strides, BroadcastStrides("BroadcastLike", x.shape(), target));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), target));
  switch (x.dtype()) {
    case DType::kString:
      BroadcastCopy<std::string>(x, target, strides, *out);
      return Status::Ok();
    case DType::kFloat64:
    case DType::kInt64:
      BroadcastCopy<int64_t>(x, target, strides, *out);  // 8-byte values, copied bit for bit
      return Status::Ok();
    case DType::kFloat32:
    case DType::kInt32:
      BroadcastCopy<int32_t>(x, target, strides, *out);
      return Status::Ok();
    case DType::kBFloat16:
      BroadcastCopy<uint16_t>(x, target, strides, *out);
      return Status::Ok();
    case DType::kBool:
      BroadcastCopy<uint8_t>(x, target, strides, *out);
      return Status::Ok();
    default:
      return InvalidArgument("BroadcastLike: unsupported dtype " + Str(DTypeName(x.dtype())));
  }
}

// ---- Sum(x; axes = all, keep_dims = false) ----

// Sum's shape rules are every reduction's (reduction.h); Mean takes them too.
StatusOr<Shape> SumShape(const AttrMap& attrs, const Shape& in, Shape* kept, const Tensor* axes = nullptr) {
  return ReductionShape("Sum", attrs, in, kept, axes);
}

StatusOr<std::vector<TensorSpec>> InferSum(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckReal("Sum", "x", ctx.inputs.empty() ? DType::kInvalid : ctx.inputs[0].dtype));
  LS_ASSIGN_OR_RETURN(Shape out, InferReductionShape("Sum", ctx));
  return Single(ctx.inputs[0].dtype, out);
}

Status SumKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape kept;
  LS_ASSIGN_OR_RETURN(Shape out_shape, SumShape(ctx.attrs(), x.shape(), &kept, AxesInput(ctx)));
  return SumDown(ctx, "Sum", x, kept, out_shape).status();
}

// ---- Mean(x; axes = all, keep_dims = false) and MeanGrad(dy, x; the same attrs) ----
//
// The mean over a batch whose size is known only at run time (a loss averaged over examples).

// How many elements each output of a reduction of `in` to `kept` averages.
int64_t ReducedCount(const Shape& in, const Shape& kept) {
  int64_t count = 1;
  for (int d = 0; d < in.rank(); ++d) {
    if (kept.dim(d) == 1) count *= in.dim(d);
  }
  return count;
}

Status MeanKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape kept;
  LS_ASSIGN_OR_RETURN(Shape out_shape, SumShape(ctx.attrs(), x.shape(), &kept, AxesInput(ctx)));
  LS_ASSIGN_OR_RETURN(Tensor * out, SumDown(ctx, "Mean", x, kept, out_shape));
  const int64_t count = ReducedCount(x.shape(), kept);
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // The mean of nothing is NaN, as numpy's.
    const T scale = count > 0 ? T(1) / static_cast<T>(count) : std::numeric_limits<T>::quiet_NaN();
    for (T& v : out->mutable_data<T>()) v *= scale;
    return Status::Ok();
  });
}

StatusOr<std::vector<TensorSpec>> InferMeanGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("MeanGrad", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckReal("MeanGrad", "dy", ctx.inputs[0].dtype));
  return Single(ctx.inputs[0].dtype, ctx.inputs[1].shape);
}

Status MeanGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  Shape kept;
  LS_RETURN_IF_ERROR(SumShape(ctx.attrs(), x.shape(), &kept).status());
  if (dy.num_elements() != kept.num_elements()) {
    return InvalidArgument("MeanGrad: dy " + dy.shape().ToString() + " does not match the mean of " +
                           x.shape().ToString());
  }
  LS_ASSIGN_OR_RETURN(auto strides, BroadcastStrides("MeanGrad", kept, x.shape()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), x.shape()));
  const int64_t count = ReducedCount(x.shape(), kept);
  return DispatchReal(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* po = out->mutable_data<T>().data();
    const T* pd = dy.data<T>().data();
    const T scale = count > 0 ? T(1) / static_cast<T>(count) : T(0);
    ForEachBroadcast(x.shape(), strides, [&](int64_t i, int64_t k) { po[i] = pd[k] * scale; });
    return Status::Ok();
  });
}

// ---- Activation derivatives: Op(dy, v) with v the forward input or output ----

enum class Derivative { kRelu, kSigmoid, kTanh, kGelu, kSilu, kHardSwish, kLeakyRelu };

constexpr std::string_view DerivativeName(Derivative d) {
  switch (d) {
    case Derivative::kRelu:
      return "ReluGrad";
    case Derivative::kSigmoid:
      return "SigmoidGrad";
    case Derivative::kTanh:
      return "TanhGrad";
    case Derivative::kGelu:
      return "GeluGrad";
    case Derivative::kSilu:
      return "SiluGrad";
    case Derivative::kHardSwish:
      return "HardSwishGrad";
    case Derivative::kLeakyRelu:
      return "LeakyReluGrad";
  }
  return "";
}

// v is the forward input x, except for Sigmoid and Tanh: their output y (cheaper from it).
// `alpha` is LeakyRelu's slope below 0. At the kinks the derivative is PyTorch's: Relu's and
// LeakyRelu's right of 0 only, HardSwish's x / 3 + 1/2 on [-3, 3].
template <Derivative D, typename T>
T ApplyDerivative(T dy, T v, T alpha) {
  if constexpr (D == Derivative::kRelu) {
    return v > T(0) ? dy : T(0);
  } else if constexpr (D == Derivative::kSigmoid) {
    return dy * v * (T(1) - v);
  } else if constexpr (D == Derivative::kTanh) {
    return dy * (T(1) - v * v);
  } else if constexpr (D == Derivative::kSilu) {
    // d/dx x s(x) = s(x) (1 + x (1 - s(x))), s the logistic function.
    const T s = T(1) / (T(1) + std::exp(-v));
    return dy * (s * (T(1) + v * (T(1) - s)));
  } else if constexpr (D == Derivative::kHardSwish) {
    if (v < T(-3)) return T(0);
    if (v > T(3)) return dy;
    return dy * (v * (T(1) / T(3)) + T(0.5));
  } else if constexpr (D == Derivative::kLeakyRelu) {
    return v > T(0) ? dy : dy * alpha;
  } else {
    const T cdf = T(0.5) * (T(1) + std::erf(v * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * v * v) * T(0.39894228040143267794);
    return dy * (cdf + v * pdf);
  }
}

StatusOr<std::vector<TensorSpec>> InferPairwise(std::string_view name, const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(name, ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckReal(name, "dy", ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckDType(name, "second input", ctx.inputs[1].dtype, ctx.inputs[0].dtype));
  Shape shape;
  for (int d = 0; d < ctx.inputs[0].shape.rank() || d < ctx.inputs[1].shape.rank(); ++d) {
    if (ctx.inputs[0].shape.rank() != ctx.inputs[1].shape.rank()) {
      return InvalidArgument(Str(name) + ": shapes differ, " + ctx.inputs[0].shape.ToString() + " and " +
                             ctx.inputs[1].shape.ToString());
    }
    int64_t merged;
    if (!MergeDim(ctx.inputs[0].shape.dim(d), ctx.inputs[1].shape.dim(d), &merged)) {
      return InvalidArgument(Str(name) + ": shapes differ, " + ctx.inputs[0].shape.ToString() + " and " +
                             ctx.inputs[1].shape.ToString());
    }
    shape.AddDim(merged);
  }
  return Single(ctx.inputs[0].dtype, shape);
}

Status CheckSameShape(std::string_view name, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return Status::Ok();
  return InvalidArgument(Str(name) + ": shapes differ, " + a.shape().ToString() + " and " +
                         b.shape().ToString());
}

template <Derivative D>
Status DerivativeKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& v = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckSameShape(DerivativeName(D), dy, v));
  double alpha = 0.0;
  if constexpr (D == Derivative::kLeakyRelu) {
    LS_ASSIGN_OR_RETURN(alpha, ctx.attrs().GetFloatOr("alpha", 0.01));
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), dy.shape()));
  return DispatchReal(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pd = dy.data<T>().data();
    const T* pv = v.data<T>().data();
    T* po = out->mutable_data<T>().data();
    const auto a = static_cast<T>(alpha);
    ctx.pool().ParallelFor(dy.num_elements(), kElementGrain / 8, [&](int64_t begin, int64_t end) {
      // float GELU and SiLU: the vectorised rows (libm's erf and exp, one element at a time, were
      // a sixth of a small ViT's training step).
      if constexpr (std::is_same_v<T, float> && (D == Derivative::kGelu || D == Derivative::kSilu)) {
        ActivationDerivativeRow(D == Derivative::kGelu ? Activation::kGelu : Activation::kSilu, pd + begin, pv + begin,
                                po + begin, end - begin);
      } else {
        for (int64_t i = begin; i < end; ++i) po[i] = ApplyDerivative<D>(pd[i], pv[i], a);
      }
    });
    return Status::Ok();
  });
}

template <Derivative D>
OpDef DerivativeDef() {
  OpDef def;
  def.name = std::string(DerivativeName(D));
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const ShapeInferenceContext& ctx) { return InferPairwise(DerivativeName(D), ctx); };
  def.compute = DerivativeKernel<D>;
  return def;
}

// ---- SoftmaxGrad(dy, y) = y (dy - sum(dy y)); LogSoftmaxGrad(dy, y) = dy - exp(y) sum(dy) ----

template <bool Log>
Status SoftmaxGradKernel(KernelContext& ctx) {
  constexpr std::string_view name = Log ? "LogSoftmaxGrad" : "SoftmaxGrad";
  const Tensor& dy = ctx.input(0);
  const Tensor& y = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckSameShape(name, dy, y));
  if (dy.shape().rank() < 1) return InvalidArgument(Str(name) + ": input must have rank >= 1, got a scalar");
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), dy.shape()));
  const int64_t n = dy.shape().dim(dy.shape().rank() - 1);
  if (dy.num_elements() == 0) return Status::Ok();
  return DispatchReal(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pd = dy.data<T>().data();
    const T* py = y.data<T>().data();
    T* po = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(dy.num_elements() / n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* d = pd + r * n;
        const T* yr = py + r * n;
        T* o = po + r * n;
        T sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += Log ? d[j] : d[j] * yr[j];
        for (int64_t j = 0; j < n; ++j) o[j] = Log ? d[j] - std::exp(yr[j]) * sum : yr[j] * (d[j] - sum);
      }
    });
    return Status::Ok();
  });
}

template <bool Log>
OpDef SoftmaxGradDef() {
  OpDef def;
  def.name = Log ? "LogSoftmaxGrad" : "SoftmaxGrad";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const ShapeInferenceContext& ctx) {
    return InferPairwise(Log ? "LogSoftmaxGrad" : "SoftmaxGrad", ctx);
  };
  def.compute = SoftmaxGradKernel<Log>;
  return def;
}

// ---- Their own gradients (for reductions inside losses) ----

Status SumLikeGrad(GradientBuilder& g) {
  g.SetInputGrad(0, g.Op("BroadcastLike", {g.output_grad(0), g.input(0)}));
  return Status::Ok();
}

Status BroadcastLikeGrad(GradientBuilder& g) {
  g.SetInputGrad(0, g.Op("SumLike", {g.output_grad(0), g.input(0)}));
  return Status::Ok();
}

// Reductions over axes given at run time (ONNX's form) serve imported models only.
Status CheckAxesAttr(const GradientBuilder& g) {
  if (g.num_inputs() == 1) return Status::Ok();
  return Unimplemented("the gradient of a reduction over axes given at run time");
}

Status MeanGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckAxesAttr(g));
  g.SetInputGrad(0, g.Op("MeanGrad", {g.output_grad(0), g.input(0)}, g.attrs()));
  return Status::Ok();
}

Status SumGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckAxesAttr(g));
  Shape kept;
  LS_ASSIGN_OR_RETURN(Shape out, SumShape(g.attrs(), g.input_spec(0).shape, &kept));
  std::string dy = g.output_grad(0);
  if (out.rank() != kept.rank()) {  // put the reduced axes back as 1s, then broadcast
    AttrMap reshape;
    reshape.Set("shape", std::vector<int64_t>(kept.dims().begin(), kept.dims().end()));
    dy = g.Op("Reshape", {dy}, std::move(reshape));
  }
  g.SetInputGrad(0, g.Op("BroadcastLike", {dy, g.input(0)}));
  return Status::Ok();
}

}  // namespace

void RegisterGradientOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("SumLike", 2, InferSumLike, SumLikeKernel, SumLikeGrad));
  (void)registry.Register(
      SimpleOpDef("BroadcastLike", 2, InferBroadcastLike, BroadcastLikeKernel, BroadcastLikeGrad));
  OpDef sum = SimpleOpDef("Sum", 1, InferSum, SumKernel, SumGrad);
  sum.max_inputs = 2;
  (void)registry.Register(std::move(sum));
  // Mean takes Sum's shape rules.
  OpDef mean = SimpleOpDef("Mean", 1, InferSum, MeanKernel, MeanGrad);
  mean.max_inputs = 2;
  (void)registry.Register(std::move(mean));
  (void)registry.Register(SimpleOpDef("MeanGrad", 2, InferMeanGrad, MeanGradKernel, nullptr));
  (void)registry.Register(DerivativeDef<Derivative::kRelu>());
  (void)registry.Register(DerivativeDef<Derivative::kSigmoid>());
  (void)registry.Register(DerivativeDef<Derivative::kTanh>());
  (void)registry.Register(DerivativeDef<Derivative::kGelu>());
  (void)registry.Register(DerivativeDef<Derivative::kSilu>());
  (void)registry.Register(DerivativeDef<Derivative::kHardSwish>());
  (void)registry.Register(DerivativeDef<Derivative::kLeakyRelu>());
  (void)registry.Register(SoftmaxGradDef<false>());
  (void)registry.Register(SoftmaxGradDef<true>());
}

}  // namespace lockstep
