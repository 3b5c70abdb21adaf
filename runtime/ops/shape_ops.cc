// The ops an imported ONNX graph computes shapes with, so that a model exported with dynamic
// batch and sequence axes finds its shapes at run time: Shape, Expand, Tile, Range and
// ConstantOfShape (Slice and Pad live in slice_ops.cc; Reshape's shape input in
// array_ops.cc). Their output shapes depend on input values, which shape inference does not
// see: it gives the rank and leaves such dimensions -1, and the kernels check the values.
// Every shape read from a tensor is bounded (shape_util.h) before anything is allocated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {

void RegisterSliceOps(OpRegistry& registry);           // slice_ops.cc
void RegisterDeferredShapeOps(OpRegistry& registry);  // deferred_shape_ops.cc

namespace {

// The length of a shape input, which is the output's rank: it must be known before run time.
StatusOr<int> RankFromShapeInput(std::string_view op, const TensorSpec& spec) {
  LS_ASSIGN_OR_RETURN(int64_t n, IntVectorLength(op, "the shape input", spec));
  if (n < 0) return InvalidArgument(Str(op) + ": the length of the shape input must be known before run time");
  if (n > Shape::kMaxRank) {
    return InvalidArgument(Str(op) + ": a shape of " + std::to_string(n) + " dimensions exceeds the maximum rank " +
                           std::to_string(Shape::kMaxRank));
  }
  return static_cast<int>(n);
}

// ---- Shape(x; attrs "start", "end") -> int64 [n]: x's dimensions [start, end) ----
//
// ONNX opset 15: start and end count from the end when negative and are clamped to [0, rank];
// a start past the end gives none. x may be of any dtype; only its shape is read.

struct DimRange {
  int begin = 0, end = 0;
};

StatusOr<DimRange> ShapeRange(const AttrMap& attrs, int rank) {
  LS_ASSIGN_OR_RETURN(int64_t start, attrs.GetIntOr("start", 0));
  LS_ASSIGN_OR_RETURN(int64_t end, attrs.GetIntOr("end", rank));
  auto clamp = [&](int64_t v) { return static_cast<int>(std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank)); };
  DimRange r;
  r.begin = clamp(start);
  r.end = std::max(r.begin, clamp(end));
  return r;
}

StatusOr<std::vector<TensorSpec>> InferShape(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Shape", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(DimRange r, ShapeRange(ctx.attrs, ctx.inputs[0].shape.rank()));
  return Single(DType::kInt64, Shape{r.end - r.begin});
}

Status ShapeKernel(KernelContext& ctx) {
  const Shape& in = ctx.input(0).shape();
  LS_ASSIGN_OR_RETURN(DimRange r, ShapeRange(ctx.attrs(), in.rank()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kInt64, Shape{r.end - r.begin}));
  int64_t* dims = out->mutable_data<int64_t>().data();
  for (int d = r.begin; d < r.end; ++d) dims[d - r.begin] = in.dim(d);
  return Status::Ok();
}

// Writes `rows` output rows of `width` elements; row r comes from the source at the walker's
// offset: `source_width` elements repeated across the row (1: a broadcast value).
template <typename T>
void RepeatRows(ThreadPool& pool, const T* src, T* dst, const SourceWalker& rows_walker, int64_t rows,
                int64_t width, int64_t source_width) {
  pool.ParallelFor(rows, std::max<int64_t>(1, kElementGrain / width), [&](int64_t begin, int64_t end) {
    SourceWalker walk = rows_walker;
    walk.Seek(begin);
    for (int64_t r = begin; r < end; ++r, walk.Next()) {
      const T* from = src + walk.offset();
      T* to = dst + r * width;
      if (source_width == 1) {
        std::fill_n(to, width, *from);
      } else {
        for (int64_t k = 0; k < width; k += source_width) std::copy_n(from, source_width, to + k);
      }
    }
  });
}

// Copies `x` into `out`, whose shape is x's broadcast (`period` 1 on the broadcast axes, x's
// size on the others) or tiled (`period` x's size, out's a multiple of it): out's axes beyond
// x's rank are leading ones, as numpy aligns shapes.
Status RepeatInto(ThreadPool& pool, std::string_view op, const Tensor& x, Tensor& out) {
  const Shape& in = x.shape();
  const Shape& os = out.shape();
  if (out.num_elements() == 0) return Status::Ok();
  const auto strides = RowMajorStrides(in);
  const int lead = os.rank() - in.rank();
  SourceWalker rows;
  for (int d = 0; d + 1 < os.rank(); ++d) {
    const int id = d - lead;
    if (id < 0) {
      rows.AddDim(os.dim(d), 1, 0);
    } else {
      rows.AddDim(os.dim(d), in.dim(id), strides[static_cast<size_t>(id)]);
    }
  }
  const int64_t width = os.rank() == 0 ? 1 : os.dim(os.rank() - 1);
  const int64_t source_width = in.rank() == 0 || os.rank() == 0 ? 1 : in.dim(in.rank() - 1);
  return DispatchCopyType(op, x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    RepeatRows(pool, CopyData<T>(x), MutableCopyData<T>(out), rows, out.num_elements() / width, width, source_width);
    return Status::Ok();
  });
}

// ---- Expand(data, shape int32/int64 vector): data broadcast with shape (ONNX's
// bidirectional numpy broadcast: a 1 in shape keeps data's dimension) ----

StatusOr<std::vector<TensorSpec>> InferExpand(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Expand", ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(int target_rank, RankFromShapeInput("Expand", ctx.inputs[1]));
  const Shape& in = ctx.inputs[0].shape;
  const int rank = std::max(in.rank(), target_rank);
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const int id = d - (rank - in.rank());
    // A known size other than 1 survives whatever the target says there (1 or the same size).
    const int64_t dim = id < 0 ? 1 : in.dim(id);
    out.AddDim(dim >= 0 && dim != 1 ? dim : -1);
  }
  return Single(ctx.inputs[0].dtype, out);
}

Status ExpandKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(IntList target, ReadIntList("Expand", "the shape input", ctx.input(1), Shape::kMaxRank));
  LS_ASSIGN_OR_RETURN(Shape target_shape, ShapeFromValues("Expand", target.span()));
  LS_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes("Expand", x.shape(), target_shape));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  return RepeatInto(ctx.pool(), "Expand", x, *out);
}

// ---- Tile(data, repeats int32/int64 vector, one per axis, each >= 0) ----

StatusOr<std::vector<TensorSpec>> InferTile(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Tile", ctx.inputs.size(), 2, 2));
  const Shape& in = ctx.inputs[0].shape;
  LS_ASSIGN_OR_RETURN(int64_t n, IntVectorLength("Tile", "repeats", ctx.inputs[1]));
  if (n >= 0 && n != in.rank()) {
    return InvalidArgument("Tile: repeats has " + std::to_string(n) + " values for an input of rank " +
                           std::to_string(in.rank()));
  }
  Shape out;
  for (int64_t d : in.dims()) out.AddDim(d == 0 ? 0 : -1);
  return Single(ctx.inputs[0].dtype, out);
}

Status TileKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& in = x.shape();
  LS_ASSIGN_OR_RETURN(IntList repeats, ReadIntList("Tile", "repeats", ctx.input(1), Shape::kMaxRank));
  if (repeats.size != in.rank()) {
    return InvalidArgument("Tile: repeats " + IntsString(repeats.span()) + " does not fit an input of rank " +
                           std::to_string(in.rank()));
  }
  IntList dims;
  dims.size = in.rank();
  for (int d = 0; d < in.rank(); ++d) {
    if (repeats[d] < 0) return InvalidArgument("Tile: repeats " + IntsString(repeats.span()) + " has a negative value");
    if (__builtin_mul_overflow(in.dim(d), repeats[d], &dims.values[static_cast<size_t>(d)])) {
      return InvalidArgument("Tile: repeating " + in.ToString() + " by " + IntsString(repeats.span()) +
                             " is too large");
    }
  }
  LS_ASSIGN_OR_RETURN(Shape out_shape, ShapeFromValues("Tile", dims.span()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  return RepeatInto(ctx.pool(), "Tile", x, *out);
}

// ---- Range(start, limit, delta): scalars of one dtype (float32, float64, int32, int64) ->
// [max(ceil((limit - start) / delta), 0)]: start, start + delta, ... short of limit ----

bool IsRangeDType(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kInt32 || d == DType::kInt64;
}

Status CheckRangeSpecs(std::span<const TensorSpec> in) {
  const char* names[] = {"start", "limit", "delta"};
  if (!IsRangeDType(in[0].dtype)) {
    return InvalidArgument("Range: dtype " + Str(DTypeName(in[0].dtype)) +
                           " is not supported (float32, float64, int32, int64)");
  }
  for (size_t i = 0; i < 3; ++i) {
    LS_RETURN_IF_ERROR(CheckDType("Range", names[i], in[i].dtype, in[0].dtype));
    LS_RETURN_IF_ERROR(CheckRank("Range", names[i], in[i].shape, 0));
  }
  return Status::Ok();
}

StatusOr<std::vector<TensorSpec>> InferRange(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Range", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(CheckRangeSpecs(ctx.inputs));
  return Single(ctx.inputs[0].dtype, Shape{-1});
}

Status TooLong(const std::string& count) {
  return InvalidArgument("Range: " + count + " elements, more than the " + std::to_string(Shape::kMaxElements) +
                         " a tensor may have");
}

// How many elements a range has: exact for integers (no overflow whatever the values), and
// computed in T for floats as ONNX does.
template <typename T>
StatusOr<int64_t> RangeCount(T start, T limit, T delta) {
  if (delta == T(0)) return InvalidArgument("Range: delta is 0");
  if constexpr (std::is_integral_v<T>) {
    if (delta > 0 ? limit <= start : limit >= start) return int64_t{0};
    const uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                    : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    const uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
    const uint64_t count = (span - 1) / step + 1;
    if (count > static_cast<uint64_t>(Shape::kMaxElements)) return TooLong(std::to_string(count));
    return static_cast<int64_t>(count);
  } else {
    const T count = std::ceil((limit - start) / delta);
    if (std::isnan(count)) return InvalidArgument("Range: the element count is NaN (a NaN or infinite input)");
    if (count <= T(0)) return int64_t{0};
    if (count > static_cast<T>(Shape::kMaxElements)) return TooLong(std::to_string(count));
    return static_cast<int64_t>(count);
  }
}

template <typename T>
Status RangeTyped(KernelContext& ctx) {
  const T start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
  LS_ASSIGN_OR_RETURN(int64_t n, RangeCount(start, limit, delta));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DTypeOf<T>::value, Shape{n}));
  T* dst = out->mutable_data<T>().data();
  ctx.pool().ParallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if constexpr (std::is_integral_v<T>) {
        // Every value lies between start and limit, but i * delta alone may not fit: unsigned
        // arithmetic wraps to the right answer.
        using U = std::make_unsigned_t<T>;
        dst[i] = static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
      } else {
        dst[i] = start + static_cast<T>(i) * delta;
      }
    }
  });
  return Status::Ok();
}

Status RangeKernel(KernelContext& ctx) {
  const TensorSpec specs[] = {{ctx.input(0).dtype(), ctx.input(0).shape()},
                              {ctx.input(1).dtype(), ctx.input(1).shape()},
                              {ctx.input(2).dtype(), ctx.input(2).shape()}};
  LS_RETURN_IF_ERROR(CheckRangeSpecs(specs));
  switch (specs[0].dtype) {
    case DType::kFloat32: return RangeTyped<float>(ctx);
    case DType::kFloat64: return RangeTyped<double>(ctx);
    case DType::kInt32: return RangeTyped<int32_t>(ctx);
    case DType::kInt64: return RangeTyped<int64_t>(ctx);
    default: return Internal("Range: unexpected dtype");
  }
}

// ---- ConstantOfShape(shape int32/int64 vector; attrs "dtype" = float32, "value" = 0) ----
//
// A tensor of that shape, every element `value` in `dtype` (float32, float64, bfloat16,
// int32, int64 or bool; integers saturate).

StatusOr<DType> ConstantDType(const AttrMap& attrs) {
  DType dtype = DType::kFloat32;
  if (attrs.Has("dtype")) {
    LS_ASSIGN_OR_RETURN(dtype, attrs.GetDType("dtype"));
  }
  if (dtype == DType::kString || dtype == DType::kInvalid) {
    return InvalidArgument("ConstantOfShape: attr 'dtype' " + Str(DTypeName(dtype)) + " is not supported");
  }
  LS_RETURN_IF_ERROR(attrs.GetFloatOr("value", 0.0).status());
  return dtype;
}

StatusOr<std::vector<TensorSpec>> InferConstantOfShape(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("ConstantOfShape", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(DType dtype, ConstantDType(ctx.attrs));
  LS_ASSIGN_OR_RETURN(int rank, RankFromShapeInput("ConstantOfShape", ctx.inputs[0]));
  Shape out;
  for (int d = 0; d < rank; ++d) out.AddDim(-1);
  return Single(dtype, out);
}

Status ConstantOfShapeKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(DType dtype, ConstantDType(ctx.attrs()));
  LS_ASSIGN_OR_RETURN(IntList dims, ReadIntList("ConstantOfShape", "the shape input", ctx.input(0), Shape::kMaxRank));
  LS_ASSIGN_OR_RETURN(Shape shape, ShapeFromValues("ConstantOfShape", dims.span()));
  LS_ASSIGN_OR_RETURN(double value, ctx.attrs().GetFloatOr("value", 0.0));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dtype, shape));
  return DispatchCopyType("ConstantOfShape", dtype, [&](auto zero) {
    using T = decltype(zero);
    const T fill = ElementBits<T>(dtype, value);
    T* dst = MutableCopyData<T>(*out);
    ctx.pool().ParallelFor(out->num_elements(), kElementGrain,
                           [&](int64_t begin, int64_t end) { std::fill(dst + begin, dst + end, fill); });
    return Status::Ok();
  });
}

}  // namespace

void RegisterShapeOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("Shape", 1, InferShape, ShapeKernel));
  (void)registry.Register(SimpleOpDef("Expand", 2, InferExpand, ExpandKernel));
  (void)registry.Register(SimpleOpDef("Tile", 2, InferTile, TileKernel));
  (void)registry.Register(SimpleOpDef("Range", 3, InferRange, RangeKernel));
  (void)registry.Register(SimpleOpDef("ConstantOfShape", 1, InferConstantOfShape, ConstantOfShapeKernel));
  RegisterSliceOps(registry);
  RegisterDeferredShapeOps(registry);
}

}  // namespace lockstep
