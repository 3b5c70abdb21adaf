// BatchNormTraining(x, gamma, beta; epsilon = 1e-3) -> (y, mean, variance): batch
// normalisation as it trains, over every axis of x but the last (NHWC images, or [batch,
// features]): per channel, the batch's mean and (biased) variance, and
//   y = (x - mean) / sqrt(variance + epsilon) * gamma + beta.
// Its gradient BatchNormTrainingGrad(dy, x, gamma, mean, variance) -> (dx, dgamma, dbeta):
//   dx = gamma / sd * (dy - mean(dy) - xhat * mean(dy * xhat)),  xhat = (x - mean) / sd,
// dgamma and dbeta the sums of dy * xhat and dy over this run's rows.
//
// The statistics are of the whole batch when the run is one replica's share of it
// (KernelContext::batch_group): each example's sums over its positions, in float64, are summed
// over the batch's examples in the batch's order (BatchGroup::SumRows), so the mean and the
// variance are the same bits however the batch is cut. The gradient's means are of the whole
// batch's loss likewise: a replica's dy is of its share's mean loss, so each example's sums are
// weighted by the replica's share of the rows before they are summed, and dx comes out as the
// gradient of the replica's own loss (what the trainer's all-reduce weights by the same share).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/batch_group.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

StatusOr<double> BatchNormEpsilon(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(double epsilon, attrs.GetFloatOr("epsilon", 1e-3));
  if (!(epsilon > 0.0)) return InvalidArgument(Str(op) + ": attr 'epsilon' must be > 0");
  return epsilon;
}

// x's rank >= 2, float32 or float64; each of `vectors` of x's dtype and shape [channels].
Status CheckBatchNormSpecs(std::string_view op, const TensorSpec& x, std::span<const TensorSpec> vectors) {
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64) {
    return InvalidArgument(Str(op) + ": x must be float32 or float64, got " + Str(DTypeName(x.dtype)));
  }
  if (x.shape.rank() < 2) return InvalidArgument(Str(op) + ": x must have rank >= 2 (a batch of channels), got " + x.shape.ToString());
  const int64_t channels = x.shape.dim(x.shape.rank() - 1);
  for (const TensorSpec& v : vectors) {
    if (v.dtype != x.dtype || v.shape.rank() != 1 ||
        (channels >= 0 && v.shape.dim(0) >= 0 && v.shape.dim(0) != channels)) {
      return InvalidArgument(Str(op) + ": each per-channel input must be " + Str(DTypeName(x.dtype)) + " [" +
                             std::to_string(channels) + "], got " + Str(DTypeName(v.dtype)) + " " +
                             v.shape.ToString());
    }
  }
  return Status::Ok();
}

// The kernels check their inputs as inference does, without allocating.
std::array<TensorSpec, 5> Specs(const KernelContext& ctx) {
  std::array<TensorSpec, 5> specs;
  for (int i = 0; i < ctx.num_inputs() && i < 5; ++i) specs[static_cast<size_t>(i)] = {ctx.input(i).dtype(), ctx.input(i).shape()};
  return specs;
}

StatusOr<std::vector<TensorSpec>> InferBatchNormTraining(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("BatchNormTraining", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(CheckBatchNormSpecs("BatchNormTraining", ctx.inputs[0], ctx.inputs.subspan(1)));
  LS_RETURN_IF_ERROR(BatchNormEpsilon("BatchNormTraining", ctx.attrs).status());
  const TensorSpec& x = ctx.inputs[0];
  const TensorSpec channels{x.dtype, Shape{x.shape.dim(x.shape.rank() - 1)}};
  return std::vector<TensorSpec>{x, channels, channels};
}

StatusOr<std::vector<TensorSpec>> InferBatchNormTrainingGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("BatchNormTrainingGrad", ctx.inputs.size(), 5, 5));
  const TensorSpec& dy = ctx.inputs[0];
  const TensorSpec& x = ctx.inputs[1];
  if (dy.dtype != x.dtype || !dy.shape.MatchesPattern(x.shape) || !x.shape.MatchesPattern(dy.shape)) {
    return InvalidArgument("BatchNormTrainingGrad: dy " + dy.shape.ToString() + " does not match x " + x.shape.ToString());
  }
  LS_RETURN_IF_ERROR(CheckBatchNormSpecs("BatchNormTrainingGrad", x, ctx.inputs.subspan(2)));
  LS_RETURN_IF_ERROR(BatchNormEpsilon("BatchNormTrainingGrad", ctx.attrs).status());
  const TensorSpec channels{x.dtype, Shape{x.shape.dim(x.shape.rank() - 1)}};
  return std::vector<TensorSpec>{x, channels, channels};
}

// Scratch that only grows, per calling thread: a warm training step allocates nothing.
// Slot 0 holds the per-example sums both kernels start from (rows x 2C), slot 1 the sums over
// the batch and the per-channel values derived from them, slot 2 the per-channel coefficients
// of the last pass (in the kernel's dtype).
template <typename T>
std::span<T> Scratch(int slot, int64_t n) {
  thread_local std::array<std::vector<T>, 3> buffers;
  std::vector<T>& b = buffers[static_cast<size_t>(slot)];
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return std::span<T>(b).first(static_cast<size_t>(n));
}

// Each example's two sums over its positions, per channel, in float64, into `sums` (rows x 2C:
// the first C of `terms(element, channel)`'s first values, then the C of its second), the
// examples in parallel, each summed in one order.
template <typename Terms>
void SumEachExample(KernelContext& ctx, int64_t rows, int64_t per_row, int64_t c, std::span<double> sums,
                    const Terms& terms) {
  ctx.pool().ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double* s = sums.data() + r * 2 * c;
      for (int64_t k = 0; k < 2 * c; ++k) s[k] = 0;
      for (int64_t p = r * per_row; p < (r + 1) * per_row; p += c) {
        for (int64_t k = 0; k < c; ++k) {
          const auto [first, second] = terms(p + k, k);
          s[k] += first;
          s[c + k] += second;
        }
      }
    }
  });
}

// Sums `local` (rows x width) over the whole batch: the group's, or this run's rows.
Status SumOverBatch(KernelContext& ctx, std::span<const double> local, int64_t width, std::span<double> sums) {
  if (BatchGroup* group = ctx.batch_group()) return group->SumRows(local, width, sums);
  SumRowsInOrder(local, width, sums);
  return Status::Ok();
}

int64_t GlobalRows(const KernelContext& ctx, int64_t rows) {
  return ctx.batch_group() != nullptr ? ctx.batch_group()->global_rows() : rows;
}

Status BatchNormTrainingKernel(KernelContext& ctx) {
  const std::array<TensorSpec, 5> specs = Specs(ctx);
  LS_RETURN_IF_ERROR(CheckBatchNormSpecs("BatchNormTraining", specs[0], std::span(specs).subspan(1, 2)));
  LS_ASSIGN_OR_RETURN(double epsilon, BatchNormEpsilon("BatchNormTraining", ctx.attrs()));
  const Tensor& x = ctx.input(0);
  const int64_t rows = x.shape().dim(0), c = x.shape().dim(x.shape().rank() - 1);
  const int64_t per_row = rows > 0 ? x.num_elements() / rows : 0;  // positions x channels
  LS_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  LS_ASSIGN_OR_RETURN(Tensor * mean_out, ctx.AllocateOutput(1, x.dtype(), Shape{c}));
  LS_ASSIGN_OR_RETURN(Tensor * var_out, ctx.AllocateOutput(2, x.dtype(), Shape{c}));
  return DispatchReal(x.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* px = x.data<T>().data();
    const std::span<double> sums = Scratch<double>(0, rows * 2 * c);
    SumEachExample(ctx, rows, per_row, c, sums, [&](int64_t e, int64_t) {
      const auto v = static_cast<double>(px[e]);
      return std::pair{v, v * v};
    });
    const std::span<double> total = Scratch<double>(1, 2 * c);
    LS_RETURN_IF_ERROR(SumOverBatch(ctx, sums, 2 * c, total));
    const auto count = static_cast<double>(GlobalRows(ctx, rows) * (per_row / std::max<int64_t>(c, 1)));
    if (count == 0) return InvalidArgument("BatchNormTraining: the batch is empty");
    const std::span<T> coefficients = Scratch<T>(2, 2 * c);
    const std::span<T> scale = coefficients.first(static_cast<size_t>(c)), shift = coefficients.last(static_cast<size_t>(c));
    const T* gamma = ctx.input(1).data<T>().data();
    const T* beta = ctx.input(2).data<T>().data();
    for (int64_t k = 0; k < c; ++k) {
      const double mean = total[static_cast<size_t>(k)] / count;
      const double var = std::max(0.0, total[static_cast<size_t>(c + k)] / count - mean * mean);
      mean_out->mutable_data<T>()[static_cast<size_t>(k)] = static_cast<T>(mean);
      var_out->mutable_data<T>()[static_cast<size_t>(k)] = static_cast<T>(var);
      const double s = static_cast<double>(gamma[k]) / std::sqrt(var + epsilon);
      scale[static_cast<size_t>(k)] = static_cast<T>(s);
      shift[static_cast<size_t>(k)] = static_cast<T>(static_cast<double>(beta[k]) - mean * s);
    }
    T* py = y->mutable_data<T>().data();
    const T* ps = scale.data();
    const T* pb = shift.data();
    ctx.pool().ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin * per_row; p < end * per_row; p += c) {
        for (int64_t k = 0; k < c; ++k) py[p + k] = px[p + k] * ps[k] + pb[k];
      }
    });
    return Status::Ok();
  });
}

Status BatchNormTrainingGradKernel(KernelContext& ctx) {
  const std::array<TensorSpec, 5> specs = Specs(ctx);
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape()) {
    return InvalidArgument("BatchNormTrainingGrad: dy " + dy.shape().ToString() + " does not match x " +
                           x.shape().ToString());
  }
  LS_RETURN_IF_ERROR(CheckBatchNormSpecs("BatchNormTrainingGrad", specs[1], std::span(specs).subspan(2, 3)));
  LS_ASSIGN_OR_RETURN(double epsilon, BatchNormEpsilon("BatchNormTrainingGrad", ctx.attrs()));
  const int64_t rows = x.shape().dim(0), c = x.shape().dim(x.shape().rank() - 1);
  const int64_t per_row = rows > 0 ? x.num_elements() / rows : 0;
  LS_ASSIGN_OR_RETURN(Tensor * dx, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  LS_ASSIGN_OR_RETURN(Tensor * dgamma, ctx.AllocateOutput(1, x.dtype(), Shape{c}));
  LS_ASSIGN_OR_RETURN(Tensor * dbeta, ctx.AllocateOutput(2, x.dtype(), Shape{c}));
  return DispatchReal(x.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* px = x.data<T>().data();
    const T* pdy = dy.data<T>().data();
    const T* gamma = ctx.input(2).data<T>().data();
    const T* mean = ctx.input(3).data<T>().data();
    const T* var = ctx.input(4).data<T>().data();
    // Slot 1: inv_sd, the run's own sums, the batch's.
    const std::span<double> per_channel = Scratch<double>(1, 5 * c);
    const std::span<double> inv_sd = per_channel.first(static_cast<size_t>(c));
    const std::span<double> local = per_channel.subspan(static_cast<size_t>(c), static_cast<size_t>(2 * c));
    const std::span<double> total = per_channel.last(static_cast<size_t>(2 * c));
    for (int64_t k = 0; k < c; ++k) inv_sd[static_cast<size_t>(k)] = 1.0 / std::sqrt(static_cast<double>(var[k]) + epsilon);
    const std::span<double> sums = Scratch<double>(0, rows * 2 * c);
    SumEachExample(ctx, rows, per_row, c, sums, [&](int64_t e, int64_t k) {
      const auto g = static_cast<double>(pdy[e]);
      const double xhat = (static_cast<double>(px[e]) - static_cast<double>(mean[k])) * inv_sd[static_cast<size_t>(k)];
      return std::pair{g, g * xhat};
    });
    // This run's own sums are dbeta and dgamma; weighted by its share, the batch's means.
    SumRowsInOrder(sums, 2 * c, local);
    for (int64_t k = 0; k < c; ++k) {
      dbeta->mutable_data<T>()[static_cast<size_t>(k)] = static_cast<T>(local[static_cast<size_t>(k)]);
      dgamma->mutable_data<T>()[static_cast<size_t>(k)] = static_cast<T>(local[static_cast<size_t>(c + k)]);
    }
    if (ctx.batch_group() != nullptr) {
      const double share = static_cast<double>(rows) / static_cast<double>(ctx.batch_group()->global_rows());
      for (double& s : sums) s *= share;
      LS_RETURN_IF_ERROR(ctx.batch_group()->SumRows(sums, 2 * c, total));
    } else {
      std::copy(local.begin(), local.end(), total.begin());
    }
    // dx = dy * a + x * b + d per channel, where with n this run's positions per channel, the
    // batch's means over the share are mean(dy) = sum(dy) / n and likewise for dy * xhat.
    const auto n = static_cast<double>(rows * (per_row / std::max<int64_t>(c, 1)));
    const std::span<T> coefficients = Scratch<T>(2, 3 * c);
    const std::span<T> a = coefficients.first(static_cast<size_t>(c));
    const std::span<T> b = coefficients.subspan(static_cast<size_t>(c), static_cast<size_t>(c));
    const std::span<T> d = coefficients.last(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k) {
      const auto u = static_cast<size_t>(k);
      const double scale = static_cast<double>(gamma[k]) * inv_sd[u];
      const double mean_dy = n > 0 ? total[u] / n : 0, mean_dy_xhat = n > 0 ? total[u + static_cast<size_t>(c)] / n : 0;
      a[u] = static_cast<T>(scale);
      b[u] = static_cast<T>(-scale * mean_dy_xhat * inv_sd[u]);
      d[u] = static_cast<T>(-scale * mean_dy + scale * mean_dy_xhat * inv_sd[u] * static_cast<double>(mean[k]));
    }
    T* pdx = dx->mutable_data<T>().data();
    ctx.pool().ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin * per_row; p < end * per_row; p += c) {
        for (int64_t k = 0; k < c; ++k) {
          const auto u = static_cast<size_t>(k);
          pdx[p + k] = pdy[p + k] * a[u] + px[p + k] * b[u] + d[u];
        }
      }
    });
    return Status::Ok();
  });
}

// The statistics outputs are for the moving averages, not the loss: no gradient flows back
// through them.
Status BatchNormTrainingGradient(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  if (!g.output_grad(1).empty() || !g.output_grad(2).empty()) {
    return Unimplemented("BatchNormTraining: no gradient through the batch's mean and variance outputs");
  }
  const std::string grad = g.Op("BatchNormTrainingGrad",
                                {g.output_grad(0), g.input(0), g.input(1), g.output(1), g.output(2)}, g.attrs());
  g.SetInputGrad(0, grad);
  if (g.needs_input_grad(1)) g.SetInputGrad(1, grad + ":1");
  if (g.needs_input_grad(2)) g.SetInputGrad(2, grad + ":2");
  return Status::Ok();
}

}  // namespace

void RegisterBatchNormOps(OpRegistry& registry) {
  OpDef forward = SimpleOpDef("BatchNormTraining", 3, InferBatchNormTraining, BatchNormTrainingKernel,
                              BatchNormTrainingGradient);
  forward.num_outputs = 3;
  (void)registry.Register(std::move(forward));
  OpDef backward = SimpleOpDef("BatchNormTrainingGrad", 5, InferBatchNormTrainingGrad, BatchNormTrainingGradKernel);
  backward.num_outputs = 3;
  (void)registry.Register(std::move(backward));
}

}  // namespace lockstep
