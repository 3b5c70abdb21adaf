// Max, Min, Prod and IntegerSum: reductions with Sum's attrs (reduction.h: "axes", absent = every axis and
// an empty list = none; "keep_dims"), over float32, float64, int32 and int64, for imported
// ONNX graphs (ReduceMax, ReduceMin, ReduceProd, and ReduceSum of integers: Sum is of reals,
// and differentiated). Not differentiated.
//
// Reducing nothing gives the operation's identity, as ONNX says: Max gives -inf (the lowest
// integer), Min +inf (the highest), Prod 1, IntegerSum 0. A NaN anywhere in the reduced elements makes the
// result NaN, as numpy's. Integer sums and products wrap (two's complement), with no undefined
// behaviour. Each output is combined in a fixed order, whatever the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/reduction.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

enum class Reduction { kMax, kMin, kProd, kIntegerSum };

constexpr std::string_view ReductionName(Reduction r) {
  switch (r) {
    case Reduction::kMax: return "Max";
    case Reduction::kMin: return "Min";
    case Reduction::kProd: return "Prod";
    case Reduction::kIntegerSum: return "IntegerSum";
  }
  return "";
}

template <Reduction R, typename T>
T IdentityOf() {
  using L = std::numeric_limits<T>;
  if constexpr (R == Reduction::kProd) {
    return T(1);
  } else if constexpr (R == Reduction::kIntegerSum) {
    return T(0);
  } else if constexpr (R == Reduction::kMax) {
    return L::has_infinity ? -L::infinity() : L::lowest();
  } else {
    return L::has_infinity ? L::infinity() : L::max();
  }
}

template <typename T>
bool IsNaN(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <Reduction R, typename T>
T Combine(T acc, T v) {
  if constexpr (R == Reduction::kProd) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(acc) * static_cast<U>(v));
    } else {
      return acc * v;
    }
  } else if constexpr (R == Reduction::kIntegerSum) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(acc) + static_cast<U>(v));
  } else if constexpr (R == Reduction::kMax) {
    return v > acc || IsNaN(v) ? v : acc;  // once acc is NaN, nothing compares above it
  } else {
    return v < acc || IsNaN(v) ? v : acc;
  }
}

template <Reduction R>
bool IsReducible(DType d) {
  if constexpr (R == Reduction::kIntegerSum) return d == DType::kInt32 || d == DType::kInt64;
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kInt32 || d == DType::kInt64;
}

template <Reduction R>
StatusOr<Shape> ReduceShape(const AttrMap& attrs, const TensorSpec& in, Shape* kept, const Tensor* axes = nullptr) {
  if (!IsReducible<R>(in.dtype)) {
    return InvalidArgument(Str(ReductionName(R)) + ": dtype " + Str(DTypeName(in.dtype)) + " is not supported (" +
                           (R == Reduction::kIntegerSum ? "int32, int64" : "float32, float64, int32, int64") + ")");
  }
  return ReductionShape(ReductionName(R), attrs, in.shape, kept, axes);
}

template <Reduction R>
StatusOr<std::vector<TensorSpec>> InferReduce(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(ReductionName(R), ctx.inputs.size(), 1, 2));
  Shape kept;
  LS_RETURN_IF_ERROR(ReduceShape<R>(AttrMap{}, ctx.inputs[0], &kept).status());  // the dtype
  LS_ASSIGN_OR_RETURN(Shape out, InferReductionShape(ReductionName(R), ctx));
  return Single(ctx.inputs[0].dtype, out);
}

// Each output element walks its reduced elements: the innermost reduced axis as a strided
// loop, the other reduced axes with a walker. `kept` is the input's shape with the reduced
// axes set to 1.
template <Reduction R, typename T>
void ReduceTyped(ThreadPool& pool, const Tensor& x, const Shape& kept, Tensor& out) {
  const Shape& in = x.shape();
  const auto strides = RowMajorStrides(in);
  const T* src = x.data<T>().data();
  T* dst = out.mutable_data<T>().data();
  const int64_t outputs = out.num_elements();
  int inner_axis = -1;
  for (int d = 0; d < in.rank(); ++d) {
    if (kept.dim(d) == 1 && in.dim(d) != 1) inner_axis = d;
  }
  SourceWalker out_base, reduced_base;
  int64_t reduced_outer = 1;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t size = in.dim(d);
    if (kept.dim(d) == size) {
      out_base.AddDim(size, size, strides[static_cast<size_t>(d)]);
    } else if (d != inner_axis) {
      reduced_base.AddDim(size, size, strides[static_cast<size_t>(d)]);
      reduced_outer *= size;
    }
  }
  const int64_t inner = inner_axis < 0 ? 1 : in.dim(inner_axis);
  const int64_t inner_stride = inner_axis < 0 ? 0 : strides[static_cast<size_t>(inner_axis)];
  const int64_t per_output = reduced_outer * inner;
  pool.ParallelFor(outputs, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(per_output, 1)),
                   [&](int64_t begin, int64_t end) {
    SourceWalker out_walk = out_base;
    out_walk.Seek(begin);
    for (int64_t o = begin; o < end; ++o, out_walk.Next()) {
      T acc = IdentityOf<R, T>();
      SourceWalker reduced = reduced_base;
      reduced.Seek(0);
      for (int64_t r = 0; r < reduced_outer; ++r, reduced.Next()) {
        const T* p = src + out_walk.offset() + reduced.offset();
        for (int64_t k = 0; k < inner; ++k) acc = Combine<R>(acc, p[k * inner_stride]);
      }
      dst[o] = acc;
    }
  });
}

template <Reduction R, typename T>
Status RunReduce(ThreadPool& pool, const Tensor& x, const Shape& kept, Tensor& out) {
  if (out.num_elements() == 0) return Status::Ok();
  if (x.num_elements() == 0) {  // every output reduces nothing
    std::fill_n(out.mutable_data<T>().data(), out.num_elements(), IdentityOf<R, T>());
    return Status::Ok();
  }
  ReduceTyped<R, T>(pool, x, kept, out);
  return Status::Ok();
}

template <Reduction R>
Status ReduceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape kept;
  LS_ASSIGN_OR_RETURN(Shape out_shape, ReduceShape<R>(ctx.attrs(), {x.dtype(), x.shape()}, &kept, AxesInput(ctx)));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  switch (x.dtype()) {
    case DType::kFloat32:
      if constexpr (R != Reduction::kIntegerSum) return RunReduce<R, float>(ctx.pool(), x, kept, *out);
      break;
    case DType::kFloat64:
      if constexpr (R != Reduction::kIntegerSum) return RunReduce<R, double>(ctx.pool(), x, kept, *out);
      break;
    case DType::kInt32: return RunReduce<R, int32_t>(ctx.pool(), x, kept, *out);
    case DType::kInt64: return RunReduce<R, int64_t>(ctx.pool(), x, kept, *out);
    default: break;
  }
  return Internal(Str(ReductionName(R)) + ": unexpected dtype");
}

template <Reduction R>
OpDef ReduceDef() {
  OpDef def = SimpleOpDef(std::string(ReductionName(R)), 1, InferReduce<R>, ReduceKernel<R>);
  def.max_inputs = 2;  // the axes, when they are an input
  return def;
}

}  // namespace

void RegisterReduceOps(OpRegistry& registry) {
  (void)registry.Register(ReduceDef<Reduction::kMax>());
  (void)registry.Register(ReduceDef<Reduction::kMin>());
  (void)registry.Register(ReduceDef<Reduction::kProd>());
  (void)registry.Register(ReduceDef<Reduction::kIntegerSum>());
}

}  // namespace lockstep
