// Training losses, fused and numerically stable, with their gradients (the mean over a batch is
// Mean, in gradient_ops.cc):
//   SoftmaxCrossEntropy(logits [N, C], labels [N] int32) -> [N]: logsumexp(x) - x[label]
//   SigmoidCrossEntropy(logits, targets) -> same shape: max(x, 0) - x z + log(1 + exp(-|x|))
// float32 and float64 (gradient checks). A label outside [0, C) is an error naming the row.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

// ---- SoftmaxCrossEntropy ----

Status CheckSoftmaxXentShapes(std::string_view name, const TensorSpec& logits, const TensorSpec& labels) {
  if (!IsReal(logits.dtype)) {
    return InvalidArgument(Str(name) + ": logits must be float32 or float64, got " +
                           Str(DTypeName(logits.dtype)));
  }
  LS_RETURN_IF_ERROR(CheckDType(name, "labels", labels.dtype, DType::kInt32));
  LS_RETURN_IF_ERROR(CheckRank(name, "logits", logits.shape, 2));
  LS_RETURN_IF_ERROR(CheckRank(name, "labels", labels.shape, 1));
  int64_t n;
  if (!MergeDim(logits.shape.dim(0), labels.shape.dim(0), &n)) {
    return InvalidArgument(Str(name) + ": " + std::to_string(labels.shape.dim(0)) + " labels for " +
                           std::to_string(logits.shape.dim(0)) + " rows of logits");
  }
  return Status::Ok();
}

StatusOr<std::vector<TensorSpec>> InferSoftmaxXent(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("SoftmaxCrossEntropy", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckSoftmaxXentShapes("SoftmaxCrossEntropy", ctx.inputs[0], ctx.inputs[1]));
  int64_t n = -1;
  (void)MergeDim(ctx.inputs[0].shape.dim(0), ctx.inputs[1].shape.dim(0), &n);
  return Single(ctx.inputs[0].dtype, Shape{n});
}

Status CheckLabels(std::string_view name, const Tensor& labels, int64_t classes) {
  const auto l = labels.data<int32_t>();
  for (size_t r = 0; r < l.size(); ++r) {
    if (l[r] < 0 || l[r] >= classes) {
      return InvalidArgument(Str(name) + ": label " + std::to_string(l[r]) + " in row " + std::to_string(r) +
                             " is out of range for " + std::to_string(classes) + " classes");
    }
  }
  return Status::Ok();
}

Status CheckRuntimeShapes(std::string_view name, const Tensor& logits, const Tensor& labels) {
  if (logits.shape().rank() != 2 || labels.shape().rank() != 1 ||
      logits.shape().dim(0) != labels.shape().dim(0)) {
    return InvalidArgument(Str(name) + ": logits " + logits.shape().ToString() + " and labels " +
                           labels.shape().ToString() + " do not match");
  }
  return CheckLabels(name, labels, logits.shape().dim(1));
}

// The row's log-sum-exp, max-shifted so nothing overflows, summed in double.
template <typename T>
double LogSumExp(const T* x, int64_t c) {
  T max = x[0];
  for (int64_t j = 1; j < c; ++j) max = x[j] > max ? x[j] : max;
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(x[j] - max));
  return static_cast<double>(max) + std::log(sum);
}

Status SoftmaxXentKernel(KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckRuntimeShapes("SoftmaxCrossEntropy", logits, labels));
  const int64_t n = logits.shape().dim(0), c = logits.shape().dim(1);
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, logits.dtype(), Shape{n}));
  if (c == 0) return InvalidArgument("SoftmaxCrossEntropy: logits have no classes");
  return DispatchReal(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = logits.data<T>().data();
    const int32_t* pl = labels.data<int32_t>().data();
    T* po = out->mutable_data<T>().data();
    for (int64_t r = 0; r < n; ++r) {
      const T* x = px + r * c;
      po[r] = static_cast<T>(LogSumExp(x, c) - static_cast<double>(x[pl[r]]));
    }
    return Status::Ok();
  });
}

// SoftmaxCrossEntropyGrad(dloss [N], logits, labels) -> dlogits: (softmax(x) - onehot) dloss.
StatusOr<std::vector<TensorSpec>> InferSoftmaxXentGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("SoftmaxCrossEntropyGrad", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(CheckSoftmaxXentShapes("SoftmaxCrossEntropyGrad", ctx.inputs[1], ctx.inputs[2]));
  return Single(ctx.inputs[1].dtype, ctx.inputs[1].shape);
}

Status SoftmaxXentGradKernel(KernelContext& ctx) {
  const Tensor& dloss = ctx.input(0);
  const Tensor& logits = ctx.input(1);
  const Tensor& labels = ctx.input(2);
  LS_RETURN_IF_ERROR(CheckRuntimeShapes("SoftmaxCrossEntropyGrad", logits, labels));
  const int64_t n = logits.shape().dim(0), c = logits.shape().dim(1);
  if (dloss.shape() != Shape{n}) return InvalidArgument("SoftmaxCrossEntropyGrad: dloss has the wrong shape");
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, logits.dtype(), logits.shape()));
  return DispatchReal(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = logits.data<T>().data();
    const T* pd = dloss.data<T>().data();
    const int32_t* pl = labels.data<int32_t>().data();
    T* po = out->mutable_data<T>().data();
    for (int64_t r = 0; r < n; ++r) {
      const T* x = px + r * c;
      T* o = po + r * c;
      const double lse = LogSumExp(x, c);
      for (int64_t j = 0; j < c; ++j) {
        const double p = std::exp(static_cast<double>(x[j]) - lse);
        o[j] = static_cast<T>((p - (j == pl[r] ? 1.0 : 0.0)) * static_cast<double>(pd[r]));
      }
    }
    return Status::Ok();
  });
}

Status SoftmaxXentGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  if (g.needs_input_grad(0)) {
    g.SetInputGrad(0, g.Op("SoftmaxCrossEntropyGrad", {g.output_grad(0), g.input(0), g.input(1)}));
  }
  return Status::Ok();  // labels are integers: no gradient
}

// ---- SigmoidCrossEntropy(logits, targets) ----

StatusOr<std::vector<TensorSpec>> InferSigmoidXent(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("SigmoidCrossEntropy", ctx.inputs.size(), 2, 2));
  if (!IsReal(ctx.inputs[0].dtype)) {
    return InvalidArgument("SigmoidCrossEntropy: logits must be float32 or float64, got " +
                           Str(DTypeName(ctx.inputs[0].dtype)));
  }
  LS_RETURN_IF_ERROR(CheckDType("SigmoidCrossEntropy", "targets", ctx.inputs[1].dtype, ctx.inputs[0].dtype));
  LS_ASSIGN_OR_RETURN(Shape out,
                      BroadcastShapes("SigmoidCrossEntropy", ctx.inputs[0].shape, ctx.inputs[1].shape));
  if (out.rank() != ctx.inputs[0].shape.rank()) {
    return InvalidArgument("SigmoidCrossEntropy: targets " + ctx.inputs[1].shape.ToString() +
                           " must have the logits' shape " + ctx.inputs[0].shape.ToString());
  }
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

template <bool kGrad>
Status SigmoidXentKernel(KernelContext& ctx) {
  // Forward: (logits, targets). Gradient: (dloss, logits, targets).
  const int first = kGrad ? 1 : 0;
  const Tensor& logits = ctx.input(first);
  const Tensor& targets = ctx.input(first + 1);
  if (logits.shape() != targets.shape() || (kGrad && ctx.input(0).shape() != logits.shape())) {
    return InvalidArgument("SigmoidCrossEntropy: logits " + logits.shape().ToString() + " and targets " +
                           targets.shape().ToString() + " differ");
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, logits.dtype(), logits.shape()));
  return DispatchReal(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = logits.data<T>().data();
    const T* pz = targets.data<T>().data();
    const T* pdl = kGrad ? ctx.input(0).data<T>().data() : nullptr;
    T* po = out->mutable_data<T>().data();
    for (int64_t i = 0; i < logits.num_elements(); ++i) {
      const T x = px[i], z = pz[i];
      if constexpr (kGrad) {
        po[i] = (T(1) / (T(1) + std::exp(-x)) - z) * pdl[i];
      } else {
        po[i] = std::max(x, T(0)) - x * z + std::log1p(std::exp(-std::fabs(x)));
      }
    }
    return Status::Ok();
  });
}

Status SigmoidXentGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  if (g.needs_input_grad(0)) {
    g.SetInputGrad(0, g.Op("SigmoidCrossEntropyGrad", {g.output_grad(0), g.input(0), g.input(1)}));
  }
  if (g.needs_input_grad(1)) {
    return Unimplemented("the gradient of SigmoidCrossEntropy with respect to its targets");
  }
  return Status::Ok();
}

}  // namespace

void RegisterLossOps(OpRegistry& registry) {
  (void)registry.Register(
      SimpleOpDef("SoftmaxCrossEntropy", 2, InferSoftmaxXent, SoftmaxXentKernel, SoftmaxXentGrad));
  (void)registry.Register(
      SimpleOpDef("SoftmaxCrossEntropyGrad", 3, InferSoftmaxXentGrad, SoftmaxXentGradKernel));
  (void)registry.Register(
      SimpleOpDef("SigmoidCrossEntropy", 2, InferSigmoidXent, SigmoidXentKernel<false>, SigmoidXentGrad));
  (void)registry.Register(SimpleOpDef(
      "SigmoidCrossEntropyGrad", 3,
      [](const ShapeInferenceContext& ctx) -> StatusOr<std::vector<TensorSpec>> {
        LS_RETURN_IF_ERROR(CheckInputCount("SigmoidCrossEntropyGrad", ctx.inputs.size(), 3, 3));
        return Single(ctx.inputs[1].dtype, ctx.inputs[1].shape);
      },
      SigmoidXentKernel<true>));
}

}  // namespace lockstep
