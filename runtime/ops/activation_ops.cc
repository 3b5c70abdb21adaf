// Relu, Gelu, Sigmoid, Tanh, Relu6, Elu, Selu, Silu (element-wise, through the same ApplyActivation as the Gemm
// epilogue so that fused and unfused graphs agree bit for bit), Softmax and LogSoftmax over
// the last axis.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/activation.h"
#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

StatusOr<std::vector<TensorSpec>> InferFloatUnary(std::string_view name,
                                                  const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(name, ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckReal(name, "input", ctx.inputs[0].dtype));
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

// The activation is a template argument so that the switch inside ApplyActivation folds away
// and the loop is a plain map (vectorised but for Tanh, Elu and Selu, which call libm).
template <Activation A, typename T>
void MapActivation(const T* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ApplyActivation(A, in[i]);
}

template <Activation A>
constexpr std::string_view ActivationOpName() {
  switch (A) {
    case Activation::kRelu: return "Relu";
    case Activation::kGelu: return "Gelu";
    case Activation::kSigmoid: return "Sigmoid";
    case Activation::kTanh: return "Tanh";
    case Activation::kRelu6: return "Relu6";
    case Activation::kElu: return "Elu";
    case Activation::kSelu: return "Selu";
    case Activation::kSilu: return "Silu";
    case Activation::kHardSwish: return "HardSwish";  // elementwise_ops.cc registers the op
    case Activation::kNone: break;
  }
  return "Identity";
}

template <Activation A>
StatusOr<std::vector<TensorSpec>> InferActivation(const ShapeInferenceContext& ctx) {
  return InferFloatUnary(ActivationOpName<A>(), ctx);
}

template <Activation A, typename T>
Status ActivationKernelTyped(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  const T* px = x.data<T>().data();
  T* po = out_ptr->mutable_data<T>().data();
  // Transcendental activations cost tens of cycles per element: smaller chunks pay.
  const int64_t grain = A == Activation::kRelu ? kElementGrain : kElementGrain / 8;
  ctx.pool().ParallelFor(x.num_elements(), grain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      ApplyActivation(A, px + begin, po + begin, end - begin);
    } else {
      MapActivation<A>(px + begin, po + begin, end - begin);
    }
  });
  return Status::Ok();
}

template <Activation A>
Status ActivationKernel(KernelContext& ctx) {
  LS_RETURN_IF_ERROR(CheckReal(ActivationOpName<A>(), "input", ctx.input(0).dtype()));
  return ctx.input(0).dtype() == DType::kFloat64 ? ActivationKernelTyped<A, double>(ctx)
                                                 : ActivationKernelTyped<A, float>(ctx);
}

// Relu and Gelu differentiate from their input, Sigmoid and Tanh (more cheaply) from their
// output.
template <Activation A>
Status ActivationGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const std::string& dy = g.output_grad(0);
  switch (A) {
    case Activation::kRelu: g.SetInputGrad(0, g.Op("ReluGrad", {dy, g.input(0)})); break;
    case Activation::kGelu: g.SetInputGrad(0, g.Op("GeluGrad", {dy, g.input(0)})); break;
    case Activation::kSigmoid: g.SetInputGrad(0, g.Op("SigmoidGrad", {dy, g.output(0)})); break;
    case Activation::kTanh: g.SetInputGrad(0, g.Op("TanhGrad", {dy, g.output(0)})); break;
    case Activation::kSilu: g.SetInputGrad(0, g.Op("SiluGrad", {dy, g.input(0)})); break;
    case Activation::kNone: g.SetInputGrad(0, dy); break;
    case Activation::kRelu6:
    case Activation::kElu:
    case Activation::kSelu:
    case Activation::kHardSwish:
      return Unimplemented(Str(ActivationOpName<A>()) + " is not differentiated");
  }
  return Status::Ok();
}

template <Activation A>
OpDef ActivationDef() {
  OpDef def;
  def.name = std::string(ActivationOpName<A>());
  def.min_inputs = def.max_inputs = 1;
  def.infer = InferActivation<A>;
  def.compute = ActivationKernel<A>;
  def.gradient = (A == Activation::kRelu6 || A == Activation::kElu || A == Activation::kSelu)
                     ? nullptr
                     : ActivationGrad<A>;
  return def;
}

// ---- Softmax / LogSoftmax over the last axis ----

Status CheckSoftmaxAxis(std::string_view name, const AttrMap& attrs, const Shape& shape) {
  if (shape.rank() < 1) {
    return InvalidArgument(Str(name) + ": input must have rank >= 1, got a scalar");
  }
  LS_ASSIGN_OR_RETURN(int64_t axis, attrs.GetIntOr("axis", -1));
  LS_ASSIGN_OR_RETURN(int a, NormalizeAxis(name, axis, shape.rank()));
  if (a != shape.rank() - 1) {
    return Unimplemented(Str(name) + ": only the last axis is supported, got axis " +
                         std::to_string(axis) + " for shape " + shape.ToString());
  }
  return Status::Ok();
}

template <bool Log>
constexpr std::string_view SoftmaxName() {
  return Log ? "LogSoftmax" : "Softmax";
}

template <bool Log>
StatusOr<std::vector<TensorSpec>> InferSoftmax(const ShapeInferenceContext& ctx) {
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> out, InferFloatUnary(SoftmaxName<Log>(), ctx));
  LS_RETURN_IF_ERROR(CheckSoftmaxAxis(SoftmaxName<Log>(), ctx.attrs, ctx.inputs[0].shape));
  return out;
}

// Stable form (LogSoftmax, and float64; float32's Softmax is activation.h's SoftmaxRow, the same
// maths vectorised): exponents are taken of x - max, so nothing overflows; the sum is kept in
// double so long rows lose nothing to it. A NaN anywhere in a row makes the whole row NaN (as the
// maths says); a row of all -inf is NaN too (0/0), and +inf gives NaN (inf - inf), as in
// TensorFlow.
template <bool Log, typename T>
void StableSoftmaxRow(const T* x, T* out, int64_t n) {
  if (n == 0) return;
  T max = x[0];
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > max || std::isnan(x[i])) max = std::isnan(max) ? max : x[i];
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const T e = std::exp(x[i] - max);
    if constexpr (!Log) out[i] = e;
    sum += e;
  }
  if constexpr (Log) {
    const T log_sum = static_cast<T>(std::log(sum));
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - max) - log_sum;
  } else {
    const T s = static_cast<T>(sum);
    for (int64_t i = 0; i < n; ++i) out[i] /= s;
  }
}

template <bool Log, typename T>
Status SoftmaxKernelTyped(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  Tensor& out = *out_ptr;
  const int64_t n = x.shape().dim(x.shape().rank() - 1);
  if (out.num_elements() == 0) return Status::Ok();
  const T* px = x.data<T>().data();
  T* po = out.mutable_data<T>().data();
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if constexpr (std::is_same_v<T, float> && !Log) {
        SoftmaxRow(px + r * n, po + r * n, n);  // vectorised (activation.h)
      } else {
        StableSoftmaxRow<Log>(px + r * n, po + r * n, n);
      }
    }
  };
  ctx.pool().ParallelFor(x.num_elements() / n, std::max<int64_t>(1, kElementGrain / 8 / n), rows);
  return Status::Ok();
}

template <bool Log>
Status SoftmaxKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckReal(SoftmaxName<Log>(), "input", x.dtype()));
  LS_RETURN_IF_ERROR(CheckSoftmaxAxis(SoftmaxName<Log>(), ctx.attrs(), x.shape()));
  return x.dtype() == DType::kFloat64 ? SoftmaxKernelTyped<Log, double>(ctx) : SoftmaxKernelTyped<Log, float>(ctx);
}

template <bool Log>
Status SoftmaxGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  g.SetInputGrad(0, g.Op(Log ? "LogSoftmaxGrad" : "SoftmaxGrad", {g.output_grad(0), g.output(0)}));
  return Status::Ok();
}

template <bool Log>
OpDef SoftmaxDef() {
  OpDef def;
  def.name = std::string(SoftmaxName<Log>());
  def.min_inputs = def.max_inputs = 1;
  def.infer = InferSoftmax<Log>;
  def.compute = SoftmaxKernel<Log>;
  def.gradient = SoftmaxGrad<Log>;
  return def;
}

}  // namespace

void RegisterActivationOps(OpRegistry& registry) {
  (void)registry.Register(ActivationDef<Activation::kRelu>());
  (void)registry.Register(ActivationDef<Activation::kGelu>());
  (void)registry.Register(ActivationDef<Activation::kSigmoid>());
  (void)registry.Register(ActivationDef<Activation::kTanh>());
  (void)registry.Register(ActivationDef<Activation::kRelu6>());
  (void)registry.Register(ActivationDef<Activation::kElu>());
  (void)registry.Register(ActivationDef<Activation::kSelu>());
  (void)registry.Register(ActivationDef<Activation::kSilu>());
  (void)registry.Register(SoftmaxDef<false>());
  (void)registry.Register(SoftmaxDef<true>());
}

}  // namespace lockstep
