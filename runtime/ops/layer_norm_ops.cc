// LayerNormalize(x[, scale, offset]; epsilon = 1e-5): each row along the last axis to zero mean
// and unit variance, y = (x - mean) / sqrt(var + epsilon) with the biased variance, as Keras's
// LayerNormalization before its scale and offset (a model adds those as Mul and Add, whose
// gradients already exist). With scale and offset (each [d], the last axis's size; what the
// fusion pass folds a model's Mul and Add into, for serving), y * scale + offset in the same
// pass, the same bits as the separate ops. LayerNormalizeGrad(dy, x; epsilon) is the gradient
// of the plain form:
//   dx = (dy - mean(dy) - y * mean(dy * y)) / sqrt(var + epsilon)
// Rows are independent: they run in parallel, each summed in one order.
#include <cstdint>
#include <type_traits>

#include "runtime/activation.h"
#include "runtime/autodiff/gradient_builder.h"
#include "runtime/layer_norm_row.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

StatusOr<double> ReadEpsilon(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(double epsilon, attrs.GetFloatOr("epsilon", 1e-5));
  if (!(epsilon >= 0.0)) return InvalidArgument(Str(op) + ": attr 'epsilon' must be >= 0");
  return epsilon;
}

StatusOr<std::vector<TensorSpec>> InferLayerNormalize(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("LayerNormalize", ctx.inputs.size(), 1, 3));
  LS_RETURN_IF_ERROR(CheckReal("LayerNormalize", "x", ctx.inputs[0].dtype));
  const Shape& x = ctx.inputs[0].shape;
  if (x.rank() < 1) return InvalidArgument("LayerNormalize: x must have rank >= 1, got a scalar");
  for (size_t k = 1; k < ctx.inputs.size(); ++k) {
    const TensorSpec& row = ctx.inputs[k];
    const int64_t d = x.dim(x.rank() - 1);
    if (row.dtype != ctx.inputs[0].dtype || row.shape.rank() != 1 ||
        (d >= 0 && row.shape.dim(0) >= 0 && row.shape.dim(0) != d)) {
      return InvalidArgument(Str("LayerNormalize: ") + (k == 1 ? "scale" : "offset") + " must be " +
                             Str(DTypeName(ctx.inputs[0].dtype)) + " [" + std::to_string(d) + "], got " +
                             Str(DTypeName(row.dtype)) + " " + row.shape.ToString());
    }
  }
  LS_RETURN_IF_ERROR(ReadEpsilon("LayerNormalize", ctx.attrs).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

StatusOr<std::vector<TensorSpec>> InferLayerNormalizeGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("LayerNormalizeGrad", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckReal("LayerNormalizeGrad", "dy", ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(ReadEpsilon("LayerNormalizeGrad", ctx.attrs).status());
  return Single(ctx.inputs[1].dtype, ctx.inputs[1].shape);
}

// Runs fn(row) for every row of `x`'s last axis, in parallel.
template <typename Fn>
void ForEachRow(KernelContext& ctx, const Tensor& x, Fn fn) {
  const int64_t d = x.shape().dim(x.shape().rank() - 1);
  if (d == 0) return;
  const int64_t rows = x.num_elements() / d;
  ctx.pool().ParallelFor(rows, std::max<int64_t>(1, kElementGrain / d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r, d);
  });
}

Status LayerNormalizeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.shape().rank() < 1) return InvalidArgument("LayerNormalize: x must have rank >= 1, got a scalar");
  const int64_t d = x.shape().dim(x.shape().rank() - 1);
  for (int k = 1; k < ctx.num_inputs(); ++k) {
    const Tensor& row = ctx.input(k);
    if (row.dtype() != x.dtype() || row.shape().rank() != 1 || row.shape().dim(0) != d) {
      return InvalidArgument(Str("LayerNormalize: ") + (k == 1 ? "scale" : "offset") + " must be " +
                             Str(DTypeName(x.dtype())) + " [" + std::to_string(d) + "], got " +
                             Str(DTypeName(row.dtype())) + " " + row.shape().ToString());
    }
  }
  LS_ASSIGN_OR_RETURN(double epsilon, ReadEpsilon("LayerNormalize", ctx.attrs()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>().data();
    const T* scale = ctx.num_inputs() > 1 ? ctx.input(1).data<T>().data() : nullptr;
    const T* offset = ctx.num_inputs() > 2 ? ctx.input(2).data<T>().data() : nullptr;
    T* py = out->mutable_data<T>().data();
    ForEachRow(ctx, x, [&](int64_t r, int64_t n) {
      if constexpr (std::is_same_v<T, float>) {
        LayerNormRow(px + r * n, scale, offset, py + r * n, n, static_cast<float>(epsilon));
      } else {
        LayerNormRowAny(px + r * n, scale, offset, py + r * n, n, static_cast<T>(epsilon));
      }
    });
    return Status::Ok();
  });
}

Status LayerNormalizeGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (dy.shape() != x.shape() || dy.dtype() != x.dtype() || x.shape().rank() < 1) {
    return InvalidArgument("LayerNormalizeGrad: dy " + dy.shape().ToString() + " " +
                           Str(DTypeName(dy.dtype())) + " does not match x " + x.shape().ToString() + " " +
                           Str(DTypeName(x.dtype())));
  }
  LS_ASSIGN_OR_RETURN(double epsilon, ReadEpsilon("LayerNormalizeGrad", ctx.attrs()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>().data();
    const T* pdy = dy.data<T>().data();
    T* pdx = out->mutable_data<T>().data();
    ForEachRow(ctx, x, [&](int64_t r, int64_t d) {
      // float per instruction set (activation.h), float64 (gradient checks) the same loops.
      if constexpr (std::is_same_v<T, float>) {
        LayerNormGradRow(px + r * d, pdy + r * d, pdx + r * d, d, static_cast<float>(epsilon));
      } else {
        LayerNormGradRowAny(px + r * d, pdy + r * d, pdx + r * d, d, static_cast<T>(epsilon));
      }
    });
    return Status::Ok();
  });
}

Status LayerNormalizeGradient(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  if (g.num_inputs() != 1) return Unimplemented("LayerNormalize: no gradient for the fused scale and offset");
  g.SetInputGrad(0, g.Op("LayerNormalizeGrad", {g.output_grad(0), g.input(0)}, g.attrs()));
  return Status::Ok();
}

}  // namespace

void RegisterLayerNormOps(OpRegistry& registry) {
  OpDef layer_normalize =
      SimpleOpDef("LayerNormalize", 1, InferLayerNormalize, LayerNormalizeKernel, LayerNormalizeGradient);
  layer_normalize.max_inputs = 3;
  (void)registry.Register(std::move(layer_normalize));
  (void)registry.Register(
      SimpleOpDef("LayerNormalizeGrad", 2, InferLayerNormalizeGrad, LayerNormalizeGradKernel));
}

}  // namespace lockstep
