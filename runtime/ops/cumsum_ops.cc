// CumSum(x, axis; attrs exclusive = false, reverse = false): running sums along one axis, as
// ONNX's (the axis a scalar input, which may count from the end). Exclusive sums leave out the
// element itself (the first is 0); reverse sums run from the end. float32, float64, int32,
// int64 (integers wrap, as Add's do).
#include <cstdint>
#include <string>
#include <type_traits>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

StatusOr<std::vector<TensorSpec>> InferCumSum(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("CumSum", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckDTypeIn("CumSum", ctx.inputs[0].dtype, DTypeSet::kNumeric));
  if (!IsIndexDType(ctx.inputs[1].dtype) || ctx.inputs[1].shape.num_elements() > 1) {
    return InvalidArgument("CumSum: axis must be one int32 or int64, got " + Str(DTypeName(ctx.inputs[1].dtype)) +
                           ctx.inputs[1].shape.ToString());
  }
  if (ctx.inputs[0].shape.rank() == 0) return InvalidArgument("CumSum: x must have rank 1 or more");
  LS_RETURN_IF_ERROR(IntFlag(ctx.attrs, "exclusive", false).status());
  LS_RETURN_IF_ERROR(IntFlag(ctx.attrs, "reverse", false).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

template <typename T>
T Plus(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

Status CumSumKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& axis_t = ctx.input(1);
  if (!IsIndexDType(axis_t.dtype()) || axis_t.num_elements() != 1) {
    return InvalidArgument("CumSum: axis must be one int32 or int64");
  }
  if (x.shape().rank() == 0) return InvalidArgument("CumSum: x must have rank 1 or more");
  LS_RETURN_IF_ERROR(CheckDTypeIn("CumSum", x.dtype(), DTypeSet::kNumeric));
  const int64_t axis_value =
      axis_t.dtype() == DType::kInt32 ? int64_t{axis_t.data<int32_t>()[0]} : axis_t.data<int64_t>()[0];
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("CumSum", axis_value, x.shape().rank()));
  LS_ASSIGN_OR_RETURN(bool exclusive, IntFlag(ctx.attrs(), "exclusive", false));
  LS_ASSIGN_OR_RETURN(bool reverse, IntFlag(ctx.attrs(), "reverse", false));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  if (x.num_elements() == 0) return Status::Ok();
  const int64_t length = x.shape().dim(axis);
  const int64_t inner = RowMajorStrides(x.shape())[static_cast<size_t>(axis)];
  const int64_t outer = x.num_elements() / (length * inner);
  return DispatchDTypeIn<DTypeSet::kNumeric>(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    // One (outer, inner) line at a time; its elements lie `inner` apart.
    ctx.pool().ParallelFor(outer * inner, std::max<int64_t>(1, kElementGrain / length), [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        const int64_t base = (line / inner) * length * inner + line % inner;
        T sum{};
        for (int64_t k = 0; k < length; ++k) {
          const int64_t at = base + (reverse ? length - 1 - k : k) * inner;
          if (exclusive) {
            dst[at] = sum;
            sum = Plus(sum, src[at]);
          } else {
            sum = Plus(sum, src[at]);
            dst[at] = sum;
          }
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterCumSumOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("CumSum", 2, InferCumSum, CumSumKernel));
}

}  // namespace lockstep
