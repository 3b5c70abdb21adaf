// Ops on the matrices of the last two axes: Trilu (their upper or lower triangle, as
// torch.triu and torch.tril export), EyeLike (ones on a diagonal) and Det (determinants).
#include <algorithm>
#include <cmath>
#include <vector>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

// The diagonal offset k of Trilu's optional input 1 (a scalar or one-element int64/int32
// tensor), 0 when absent.
StatusOr<int64_t> ReadDiagonal(const KernelContext& ctx) {
  if (ctx.num_inputs() < 2) return int64_t{0};
  const Tensor& k = ctx.input(1);
  if (!IsIndexDType(k.dtype()) || k.num_elements() != 1) {
    return InvalidArgument("Trilu: k must be one int32 or int64, got " + Str(DTypeName(k.dtype())) +
                           k.shape().ToString());
  }
  return k.dtype() == DType::kInt32 ? int64_t{k.data<int32_t>()[0]} : k.data<int64_t>()[0];
}

// ---- Trilu(x [..., N, M], k?; attr upper = true) ----
//
// Keeps element (i, j) of each matrix where j - i >= k (upper) or j - i <= k (lower), and
// zeroes the others. Any dtype but strings.

StatusOr<std::vector<TensorSpec>> InferTrilu(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Trilu", ctx.inputs.size(), 1, 2));
  const TensorSpec& x = ctx.inputs[0];
  if (x.shape.rank() < 2) return InvalidArgument("Trilu: x must have rank 2 or more, got " + x.shape.ToString());
  LS_RETURN_IF_ERROR(CheckDTypeIn("Trilu", x.dtype, DTypeSet::kNonString));
  if (ctx.inputs.size() == 2 && (!IsIndexDType(ctx.inputs[1].dtype) || ctx.inputs[1].shape.num_elements() > 1)) {
    return InvalidArgument("Trilu: k must be one int32 or int64, got " + Str(DTypeName(ctx.inputs[1].dtype)) +
                           ctx.inputs[1].shape.ToString());
  }
  LS_RETURN_IF_ERROR(ctx.attrs.GetBoolOr("upper", true).status());
  return Single(x.dtype, x.shape);
}

Status TriluKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.shape().rank() < 2) return InvalidArgument("Trilu: x must have rank 2 or more, got " + x.shape().ToString());
  LS_ASSIGN_OR_RETURN(int64_t k, ReadDiagonal(ctx));
  LS_ASSIGN_OR_RETURN(bool upper, ctx.attrs().GetBoolOr("upper", true));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  if (x.num_elements() == 0) return Status::Ok();
  const int64_t rows = x.shape().dim(x.shape().rank() - 2), cols = x.shape().dim(x.shape().rank() - 1);
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);  // past either corner all is kept or zeroed
  const size_t size = DTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(out->mutable_raw_data());
  // Row i keeps columns [begin, end): from i + k on (upper), up to i + k (lower).
  ctx.pool().ParallelFor(x.num_elements() / cols, std::max<int64_t>(1, kElementGrain / cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t i = r % rows;
      const int64_t diagonal = i + k;
      const int64_t begin = upper ? std::clamp<int64_t>(diagonal, 0, cols) : 0;
      const int64_t end = upper ? cols : std::clamp<int64_t>(diagonal + 1, 0, cols);
      uint8_t* row = dst + static_cast<size_t>(r * cols) * size;
      const uint8_t* from = src + static_cast<size_t>(r * cols) * size;
      std::memset(row, 0, static_cast<size_t>(cols) * size);
      if (end > begin) {
        std::memcpy(row + static_cast<size_t>(begin) * size, from + static_cast<size_t>(begin) * size,
                    static_cast<size_t>(end - begin) * size);
      }
    }
  });
  return Status::Ok();
}

// ---- EyeLike(x [N, M]; attrs dtype = x's, k = 0) ----
//
// An N x M matrix of `dtype` with ones where j - i = k and zeros elsewhere.

StatusOr<DType> EyeDType(const AttrMap& attrs, DType input) {
  if (!attrs.Has("dtype")) return input;
  return attrs.GetDType("dtype");
}

StatusOr<std::vector<TensorSpec>> InferEyeLike(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("EyeLike", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckRank("EyeLike", "x", ctx.inputs[0].shape, 2));
  LS_ASSIGN_OR_RETURN(DType dtype, EyeDType(ctx.attrs, ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckDTypeIn("EyeLike", dtype, DTypeSet::kNonString));
  LS_RETURN_IF_ERROR(ctx.attrs.GetIntOr("k", 0).status());
  return Single(dtype, ctx.inputs[0].shape);
}

Status EyeLikeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckRank("EyeLike", "x", x.shape(), 2));
  LS_ASSIGN_OR_RETURN(DType dtype, EyeDType(ctx.attrs(), x.dtype()));
  LS_RETURN_IF_ERROR(CheckDTypeIn("EyeLike", dtype, DTypeSet::kNonString));
  LS_ASSIGN_OR_RETURN(int64_t k, ctx.attrs().GetIntOr("k", 0));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dtype, x.shape()));
  if (out->num_elements() == 0) return Status::Ok();
  std::memset(out->mutable_raw_data(), 0, out->byte_size());
  const int64_t rows = x.shape().dim(0), cols = x.shape().dim(1);
  k = std::clamp<int64_t>(k, -rows, cols);
  return DispatchCopyType("EyeLike", dtype, [&](auto zero) {
    using U = decltype(zero);
    const U one = ElementBits<U>(dtype, 1.0);
    U* data = MutableCopyData<U>(*out);
    for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i) data[i * cols + i + k] = one;
    return Status::Ok();
  });
}

// ---- Det(x [..., M, M]) -> [...] ----
//
// By LU decomposition with partial pivoting, in double.

StatusOr<Shape> DetShape(const Shape& x) {
  int64_t m;
  if (x.rank() < 2 || !MergeDim(x.dim(x.rank() - 2), x.dim(x.rank() - 1), &m)) {
    return InvalidArgument("Det: x must be square matrices [..., M, M], got " + x.ToString());
  }
  Shape out;
  for (int d = 0; d + 2 < x.rank(); ++d) out.AddDim(x.dim(d));
  return out;
}

StatusOr<std::vector<TensorSpec>> InferDet(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Det", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckReal("Det", "x", ctx.inputs[0].dtype));
  LS_ASSIGN_OR_RETURN(Shape out, DetShape(ctx.inputs[0].shape));
  return Single(ctx.inputs[0].dtype, out);
}

Status DetKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckReal("Det", "x", x.dtype()));
  LS_ASSIGN_OR_RETURN(Shape out_shape, DetShape(x.shape()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  const int64_t m = x.shape().dim(x.shape().rank() - 1);
  if (m > 4096) return InvalidArgument("Det: matrices of " + std::to_string(m) + " rows are more than 4096");
  thread_local std::vector<double> a;
  a.resize(static_cast<size_t>(m * m));
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    for (int64_t k = 0; k < out->num_elements(); ++k) {
      for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = static_cast<double>(src[k * m * m + i]);
      double det = 1;
      for (int64_t c = 0; c < m && det != 0; ++c) {
        int64_t pivot = c;
        for (int64_t r = c + 1; r < m; ++r) {
          if (std::fabs(a[static_cast<size_t>(r * m + c)]) > std::fabs(a[static_cast<size_t>(pivot * m + c)])) pivot = r;
        }
        if (a[static_cast<size_t>(pivot * m + c)] == 0) {
          det = 0;
          break;
        }
        if (pivot != c) {
          for (int64_t j = 0; j < m; ++j) std::swap(a[static_cast<size_t>(pivot * m + j)], a[static_cast<size_t>(c * m + j)]);
          det = -det;
        }
        const double d = a[static_cast<size_t>(c * m + c)];
        det *= d;
        for (int64_t r = c + 1; r < m; ++r) {
          const double f = a[static_cast<size_t>(r * m + c)] / d;
          for (int64_t j = c; j < m; ++j) a[static_cast<size_t>(r * m + j)] -= f * a[static_cast<size_t>(c * m + j)];
        }
      }
      dst[k] = static_cast<T>(det);
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterMatrixOps(OpRegistry& registry) {
  OpDef trilu = SimpleOpDef("Trilu", 1, InferTrilu, TriluKernel);
  trilu.max_inputs = 2;
  (void)registry.Register(std::move(trilu));
  (void)registry.Register(SimpleOpDef("EyeLike", 1, InferEyeLike, EyeLikeKernel));
  (void)registry.Register(SimpleOpDef("Det", 1, InferDet, DetKernel));
}

}  // namespace lockstep
