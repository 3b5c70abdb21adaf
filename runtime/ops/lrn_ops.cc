// LRN(x [N, C, ...]; attrs size, alpha = 1e-4, beta = 0.75, bias = 1): local response
// normalisation across channels, as ONNX defines it (AlexNet's):
//   y[n, c, ...] = x[n, c, ...] / (bias + alpha / size * sum of x[n, c', ...]² over
//                  c' in [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)])^beta.
// float32 and float64 (the sum in double).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

struct LrnParams {
  int64_t size = 1;
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
};

StatusOr<LrnParams> ReadLrn(const AttrMap& attrs) {
  LrnParams p;
  LS_ASSIGN_OR_RETURN(p.size, attrs.GetInt("size"));
  if (p.size < 1) return InvalidArgument("LRN: attr 'size' must be positive, got " + std::to_string(p.size));
  LS_ASSIGN_OR_RETURN(p.alpha, attrs.GetFloatOr("alpha", 1e-4));
  LS_ASSIGN_OR_RETURN(p.beta, attrs.GetFloatOr("beta", 0.75));
  LS_ASSIGN_OR_RETURN(p.bias, attrs.GetFloatOr("bias", 1.0));
  return p;
}

StatusOr<std::vector<TensorSpec>> InferLrn(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("LRN", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckReal("LRN", "x", ctx.inputs[0].dtype));
  if (ctx.inputs[0].shape.rank() < 2) return InvalidArgument("LRN: x must have rank 2 or more (N, C, ...)");
  LS_RETURN_IF_ERROR(ReadLrn(ctx.attrs).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

Status LrnKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(InferLrn({std::vector<TensorSpec>{{x.dtype(), x.shape()}}, ctx.attrs()}).status());
  LS_ASSIGN_OR_RETURN(LrnParams p, ReadLrn(ctx.attrs()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  if (x.num_elements() == 0) return Status::Ok();
  const int64_t n = x.shape().dim(0), c = x.shape().dim(1), inner = x.num_elements() / (n * c);
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(n * c, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const int64_t image = nc / c, channel = nc % c;
        const int64_t lo = std::max<int64_t>(0, channel - before), hi = std::min(c - 1, channel + after);
        for (int64_t i = 0; i < inner; ++i) {
          double sum = 0;
          for (int64_t k = lo; k <= hi; ++k) {
            const double v = src[(image * c + k) * inner + i];
            sum += v * v;
          }
          const int64_t at = nc * inner + i;
          dst[at] = static_cast<T>(static_cast<double>(src[at]) / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sum, p.beta));
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterLrnOps(OpRegistry& registry) { (void)registry.Register(SimpleOpDef("LRN", 1, InferLrn, LrnKernel)); }

}  // namespace lockstep
