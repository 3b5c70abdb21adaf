// DropoutMask(x, seed; rate, stream = 0): a tensor of x's shape and dtype holding
// 1 / (1 - rate) where an element is kept and 0 where it is dropped, each element dropped with
// probability `rate`. Multiplying by it is inverted dropout: the expected value is unchanged,
// so the layer is simply left out of an inference graph.
//
// Stateless: element i's draw is a hash of (seed, stream, i), so the mask depends on nothing
// but its inputs (a resumed training run draws the same masks as an uninterrupted one), the
// elements can be filled in parallel, and two layers fed one seed differ by their stream.
// The mask carries no gradient to x, whose values it never reads.
#include <cstdint>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

// SplitMix64's finaliser: a bijection on 64 bits whose output bits each depend on every input bit.
constexpr uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

StatusOr<double> ReadRate(const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(double rate, attrs.GetFloatOr("rate", 0.5));
  if (!(rate >= 0.0 && rate < 1.0)) {
    return InvalidArgument("DropoutMask: attr 'rate' must be in [0, 1), got " + std::to_string(rate));
  }
  return rate;
}

StatusOr<std::vector<TensorSpec>> InferDropoutMask(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("DropoutMask", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckReal("DropoutMask", "x", ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckDType("DropoutMask", "seed", ctx.inputs[1].dtype, DType::kInt64));
  LS_RETURN_IF_ERROR(CheckRank("DropoutMask", "seed", ctx.inputs[1].shape, 0));
  LS_RETURN_IF_ERROR(ReadRate(ctx.attrs).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

Status DropoutMaskKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& seed = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckDType("DropoutMask", "seed", seed.dtype(), DType::kInt64));
  LS_RETURN_IF_ERROR(CheckRank("DropoutMask", "seed", seed.shape(), 0));
  LS_ASSIGN_OR_RETURN(double rate, ReadRate(ctx.attrs()));
  LS_ASSIGN_OR_RETURN(int64_t stream, ctx.attrs().GetIntOr("stream", 0));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  const uint64_t base =
      Mix(static_cast<uint64_t>(seed.data<int64_t>()[0]) ^ Mix(static_cast<uint64_t>(stream)));
  // Kept when the top 53 bits, as a fraction of 2^53, are at least `rate`.
  const auto threshold = static_cast<uint64_t>(rate * 0x1p53);
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T keep = static_cast<T>(1.0 / (1.0 - rate));
    T* po = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(out->num_elements(), kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        po[i] = (Mix(base + static_cast<uint64_t>(i)) >> 11) >= threshold ? keep : T(0);
      }
    });
    return Status::Ok();
  });
}

// x is there for its shape only: no gradient reaches it through the mask.
Status DropoutMaskGradient(GradientBuilder&) {
  return Status::Ok();
}

}  // namespace

void RegisterRandomOps(OpRegistry& registry) {
  (void)registry.Register(
      SimpleOpDef("DropoutMask", 2, InferDropoutMask, DropoutMaskKernel, DropoutMaskGradient));
}

}  // namespace lockstep
