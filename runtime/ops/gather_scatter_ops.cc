// Element gathers and scatters by index tensors, with ONNX's semantics: GatherElements and
// ScatterElements (one index per element, along an axis), GatherND and ScatterND (an index
// tuple per slice). Indices are int32 or int64, may count from the end (negative), and are
// checked: an index out of range fails the run, naming it, instead of reading or writing
// past the tensor. The data may be of any dtype but strings; the scatters' reductions (attr
// "reduction": none, add, mul, max, min) need a numeric one. Scatters apply the updates in
// order, so with repeated indices and no reduction the last update wins (onnxruntime's order).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ReadReduction(std::string_view op, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view r, attrs.GetStringViewOr("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return InvalidArgument(Str(op) + ": attr 'reduction' must be none, add, mul, max or min, got '" + Str(r) + "'");
}

Status CheckData(std::string_view op, DType dtype, Reduction reduction) {
  return CheckDTypeIn(op, dtype, reduction == Reduction::kNone ? DTypeSet::kNonString : DTypeSet::kNumeric);
}

Status CheckIndices(std::string_view op, DType dtype) {
  if (IsIndexDType(dtype)) return Status::Ok();
  return InvalidArgument(Str(op) + ": indices must be int32 or int64, got " + Str(DTypeName(dtype)));
}

int64_t IndexAt(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::kInt32 ? int64_t{indices.data<int32_t>()[static_cast<size_t>(i)]}
                                          : indices.data<int64_t>()[static_cast<size_t>(i)];
}

// `index` counted from the end when negative, in [0, dim); else an error.
StatusOr<int64_t> CheckedIndex(std::string_view op, int64_t index, int64_t dim) {
  const int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim) {
    return InvalidArgument(Str(op) + ": index " + std::to_string(index) + " is out of range for a dimension of " +
                           std::to_string(dim));
  }
  return i;
}

template <typename T>
void Combine(Reduction r, T& into, T value) {
  switch (r) {
    case Reduction::kNone: into = value; break;
    case Reduction::kAdd: into = static_cast<T>(into + value); break;
    case Reduction::kMul: into = static_cast<T>(into * value); break;
    case Reduction::kMax: into = std::max(into, value); break;
    case Reduction::kMin: into = std::min(into, value); break;
  }
}

// Calls fn(T{}) with the element type of `dtype`: its own for the reductions (which compute),
// an unsigned integer of its size for a plain copy.
template <typename Fn>
Status DispatchScatter(std::string_view op, DType dtype, Reduction r, Fn&& fn) {
  if (r == Reduction::kNone) {
    return DispatchCopyType(op, dtype, [&](auto zero) -> Status {
      if constexpr (std::is_same_v<decltype(zero), std::string>) return Internal(Str(op) + ": strings");
      else return fn(zero);
    });
  }
  return DispatchDTypeIn<DTypeSet::kNumeric>(dtype, fn);
}

// Calls visit(i, base) for each element i of an `indices` shape in order, `base` being the
// offset in the data (of `data_strides`) of i's coordinates but the one on `axis`: the
// coordinates are walked, not divided out of i, as a detector's millions of elements need.
template <typename Visit>
Status ForEachElement(const Shape& indices, std::span<const int64_t> data_strides, int axis, Visit&& visit) {
  int64_t coord[Shape::kMaxRank] = {};
  int64_t base = 0;
  const int64_t count = indices.num_elements();
  for (int64_t i = 0; i < count; ++i) {
    LS_RETURN_IF_ERROR(visit(i, base));
    for (int d = indices.rank() - 1; d >= 0; --d) {
      const int64_t stride = d == axis ? 0 : data_strides[static_cast<size_t>(d)];
      base += stride;
      if (++coord[d] < indices.dim(d)) break;
      base -= coord[d] * stride;
      coord[d] = 0;
    }
  }
  return Status::Ok();
}

// ---- GatherElements(data, indices; axis) -> indices' shape ----

StatusOr<std::vector<TensorSpec>> InferGatherElements(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("GatherElements", ctx.inputs.size(), 2, 2));
  const TensorSpec& data = ctx.inputs[0];
  const TensorSpec& indices = ctx.inputs[1];
  LS_RETURN_IF_ERROR(CheckData("GatherElements", data.dtype, Reduction::kNone));
  LS_RETURN_IF_ERROR(CheckIndices("GatherElements", indices.dtype));
  if (data.shape.rank() == 0 || indices.shape.rank() != data.shape.rank()) {
    return InvalidArgument("GatherElements: data " + data.shape.ToString() + " and indices " + indices.shape.ToString() +
                           " must have one rank, at least 1");
  }
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs.GetIntOr("axis", 0));
  LS_RETURN_IF_ERROR(NormalizeAxis("GatherElements", axis, data.shape.rank()).status());
  return Single(data.dtype, indices.shape);
}

Status GatherElementsKernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  LS_RETURN_IF_ERROR(InferGatherElements({std::vector<TensorSpec>{{data.dtype(), data.shape()},
                                                                  {indices.dtype(), indices.shape()}},
                                          ctx.attrs()})
                         .status());
  const int rank = data.shape().rank();
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("GatherElements", *ctx.attrs().GetIntOr("axis", 0), rank));
  for (int d = 0; d < rank; ++d) {
    if (d != axis && indices.shape().dim(d) > data.shape().dim(d)) {
      return InvalidArgument("GatherElements: indices " + indices.shape().ToString() + " go past data " +
                             data.shape().ToString() + " on axis " + std::to_string(d));
    }
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, data.dtype(), indices.shape()));
  if (out->num_elements() == 0) return Status::Ok();
  const auto data_strides = RowMajorStrides(data.shape());
  return DispatchCopyType("GatherElements", data.dtype(), [&](auto zero) -> Status {
    using U = decltype(zero);
    if constexpr (std::is_same_v<U, std::string>) {
      return Internal("GatherElements: strings");
    } else {
      const U* src = CopyData<U>(data);
      U* dst = MutableCopyData<U>(*out);
      const int64_t axis_stride = data_strides[static_cast<size_t>(axis)];
      return ForEachElement(indices.shape(), data_strides, axis, [&](int64_t i, int64_t base) -> Status {
        LS_ASSIGN_OR_RETURN(int64_t at, CheckedIndex("GatherElements", IndexAt(indices, i), data.shape().dim(axis)));
        dst[i] = src[base + at * axis_stride];
        return Status::Ok();
      });
    }
  });
}

// ---- ScatterElements(data, indices, updates; axis, reduction) -> data's shape ----

StatusOr<std::vector<TensorSpec>> InferScatterElements(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("ScatterElements", ctx.inputs.size(), 3, 3));
  const TensorSpec& data = ctx.inputs[0];
  LS_ASSIGN_OR_RETURN(Reduction r, ReadReduction("ScatterElements", ctx.attrs));
  LS_RETURN_IF_ERROR(CheckData("ScatterElements", data.dtype, r));
  LS_RETURN_IF_ERROR(CheckIndices("ScatterElements", ctx.inputs[1].dtype));
  LS_RETURN_IF_ERROR(CheckSameDType("ScatterElements", data.dtype, ctx.inputs[2].dtype));
  if (data.shape.rank() == 0 || ctx.inputs[1].shape.rank() != data.shape.rank() ||
      !(ctx.inputs[1].shape == ctx.inputs[2].shape || !ctx.inputs[1].shape.IsFullyDefined() ||
        !ctx.inputs[2].shape.IsFullyDefined())) {
    return InvalidArgument("ScatterElements: indices " + ctx.inputs[1].shape.ToString() + " and updates " +
                           ctx.inputs[2].shape.ToString() + " must have one shape, of data's rank");
  }
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs.GetIntOr("axis", 0));
  LS_RETURN_IF_ERROR(NormalizeAxis("ScatterElements", axis, data.shape.rank()).status());
  return Single(data.dtype, data.shape);
}

Status ScatterElementsKernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  LS_RETURN_IF_ERROR(InferScatterElements({std::vector<TensorSpec>{{data.dtype(), data.shape()},
                                                                   {indices.dtype(), indices.shape()},
                                                                   {updates.dtype(), updates.shape()}},
                                           ctx.attrs()})
                         .status());
  if (!(indices.shape() == updates.shape())) {
    return InvalidArgument("ScatterElements: indices " + indices.shape().ToString() + " and updates " +
                           updates.shape().ToString() + " differ");
  }
  const int rank = data.shape().rank();
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("ScatterElements", *ctx.attrs().GetIntOr("axis", 0), rank));
  LS_ASSIGN_OR_RETURN(Reduction r, ReadReduction("ScatterElements", ctx.attrs()));
  for (int d = 0; d < rank; ++d) {
    if (d != axis && indices.shape().dim(d) > data.shape().dim(d)) {
      return InvalidArgument("ScatterElements: indices " + indices.shape().ToString() + " go past data " +
                             data.shape().ToString() + " on axis " + std::to_string(d));
    }
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, data.dtype(), data.shape()));
  if (data.num_elements() > 0) std::memcpy(out->mutable_raw_data(), data.raw_data(), data.byte_size());
  const auto data_strides = RowMajorStrides(data.shape());
  return DispatchScatter("ScatterElements", data.dtype(), r, [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* from = static_cast<const T*>(updates.raw_data());
    T* dst = static_cast<T*>(out->mutable_raw_data());
    const int64_t axis_stride = data_strides[static_cast<size_t>(axis)];
    return ForEachElement(indices.shape(), data_strides, axis, [&](int64_t i, int64_t base) -> Status {
      LS_ASSIGN_OR_RETURN(int64_t at, CheckedIndex("ScatterElements", IndexAt(indices, i), data.shape().dim(axis)));
      Combine(r, dst[base + at * axis_stride], from[i]);
      return Status::Ok();
    });
  });
}

// ---- GatherND(data, indices [..., k]; batch_dims = b) ----
//
// out[i..., j] = data[batch i[:b]..., indices[i..., 0..k)..., j]: shape indices.shape[:-1] +
// data.shape[b + k:].

struct NdGeometry {
  int batch_dims = 0;
  int64_t k = 0;
};

StatusOr<NdGeometry> ReadNdGeometry(std::string_view op, const Shape& data, const Shape& indices, int64_t batch_dims) {
  if (indices.rank() < 1) return InvalidArgument(Str(op) + ": indices must have rank 1 or more");
  NdGeometry g;
  if (batch_dims < 0 || batch_dims >= indices.rank() || batch_dims >= data.rank()) {
    return InvalidArgument(Str(op) + ": batch_dims " + std::to_string(batch_dims) + " does not fit data " +
                           data.ToString() + " and indices " + indices.ToString());
  }
  g.batch_dims = static_cast<int>(batch_dims);
  g.k = indices.dim(indices.rank() - 1);
  if (g.k >= 0 && g.batch_dims + g.k > data.rank()) {
    return InvalidArgument(Str(op) + ": index tuples of " + std::to_string(g.k) + " reach past data " + data.ToString());
  }
  for (int d = 0; d < g.batch_dims; ++d) {
    int64_t merged;
    if (!MergeDim(data.dim(d), indices.dim(d), &merged)) {
      return InvalidArgument(Str(op) + ": data " + data.ToString() + " and indices " + indices.ToString() +
                             " differ on batch dimension " + std::to_string(d));
    }
  }
  return g;
}

StatusOr<std::vector<TensorSpec>> InferGatherND(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("GatherND", ctx.inputs.size(), 2, 2));
  const TensorSpec& data = ctx.inputs[0];
  const Shape& indices = ctx.inputs[1].shape;
  LS_RETURN_IF_ERROR(CheckData("GatherND", data.dtype, Reduction::kNone));
  LS_RETURN_IF_ERROR(CheckIndices("GatherND", ctx.inputs[1].dtype));
  LS_ASSIGN_OR_RETURN(int64_t batch_dims, ctx.attrs.GetIntOr("batch_dims", 0));
  LS_ASSIGN_OR_RETURN(NdGeometry g, ReadNdGeometry("GatherND", data.shape, indices, batch_dims));
  if (g.k < 0) return InvalidArgument("GatherND: the length of the index tuples must be known before run time");
  Shape out;
  for (int d = 0; d + 1 < indices.rank(); ++d) out.AddDim(indices.dim(d));
  for (int d = g.batch_dims + static_cast<int>(g.k); d < data.shape.rank(); ++d) {
    if (!out.AddDim(data.shape.dim(d))) return InvalidArgument("GatherND: the output's rank exceeds the maximum");
  }
  return Single(data.dtype, out);
}

// The product of dimensions [begin, end) of `s`.
int64_t DimsProduct(const Shape& s, int begin, int end) {
  int64_t n = 1;
  for (int d = begin; d < end; ++d) n *= s.dim(d);
  return n;
}

// The element offset in `data` of index tuple `t` (of `g.k` values) of batch `batch`.
StatusOr<int64_t> TupleOffset(std::string_view op, const Tensor& data, const Tensor& indices, const NdGeometry& g,
                              int64_t t, int64_t batch, const std::array<int64_t, Shape::kMaxRank>& strides) {
  int64_t offset = 0, rest = batch;
  for (int d = g.batch_dims - 1; d >= 0; --d) {
    offset += (rest % data.shape().dim(d)) * strides[static_cast<size_t>(d)];
    rest /= data.shape().dim(d);
  }
  for (int64_t j = 0; j < g.k; ++j) {
    const int d = g.batch_dims + static_cast<int>(j);
    LS_ASSIGN_OR_RETURN(int64_t c, CheckedIndex(op, IndexAt(indices, t * g.k + j), data.shape().dim(d)));
    offset += c * strides[static_cast<size_t>(d)];
  }
  return offset;
}

Status GatherNDKernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> spec,
                      InferGatherND({std::vector<TensorSpec>{{data.dtype(), data.shape()}, {indices.dtype(), indices.shape()}},
                                     ctx.attrs()}));
  LS_ASSIGN_OR_RETURN(NdGeometry g, ReadNdGeometry("GatherND", data.shape(), indices.shape(),
                                                   *ctx.attrs().GetIntOr("batch_dims", 0)));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, data.dtype(), spec[0].shape));
  if (out->num_elements() == 0) return Status::Ok();
  const auto strides = RowMajorStrides(data.shape());
  const int rank = indices.shape().rank();
  const int64_t slice_elements = DimsProduct(data.shape(), g.batch_dims + static_cast<int>(g.k), data.shape().rank());
  const int64_t per_batch = DimsProduct(indices.shape(), g.batch_dims, rank - 1);
  const int64_t tuples = DimsProduct(indices.shape(), 0, rank - 1);
  const size_t bytes = static_cast<size_t>(slice_elements) * DTypeSize(data.dtype());
  const auto* src = static_cast<const uint8_t*>(data.raw_data());
  auto* dst = static_cast<uint8_t*>(out->mutable_raw_data());
  for (int64_t t = 0; t < tuples; ++t) {
    LS_ASSIGN_OR_RETURN(int64_t offset, TupleOffset("GatherND", data, indices, g, t, t / std::max<int64_t>(per_batch, 1), strides));
    std::memcpy(dst + static_cast<size_t>(t) * bytes, src + static_cast<size_t>(offset) * DTypeSize(data.dtype()), bytes);
  }
  return Status::Ok();
}

// ---- ScatterND(data, indices [..., k], updates; reduction) -> data's shape ----

StatusOr<std::vector<TensorSpec>> InferScatterND(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("ScatterND", ctx.inputs.size(), 3, 3));
  const TensorSpec& data = ctx.inputs[0];
  LS_ASSIGN_OR_RETURN(Reduction r, ReadReduction("ScatterND", ctx.attrs));
  LS_RETURN_IF_ERROR(CheckData("ScatterND", data.dtype, r));
  LS_RETURN_IF_ERROR(CheckIndices("ScatterND", ctx.inputs[1].dtype));
  LS_RETURN_IF_ERROR(CheckSameDType("ScatterND", data.dtype, ctx.inputs[2].dtype));
  LS_RETURN_IF_ERROR(ReadNdGeometry("ScatterND", data.shape, ctx.inputs[1].shape, 0).status());
  return Single(data.dtype, data.shape);
}

Status ScatterNDKernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  LS_RETURN_IF_ERROR(InferScatterND({std::vector<TensorSpec>{{data.dtype(), data.shape()},
                                                             {indices.dtype(), indices.shape()},
                                                             {updates.dtype(), updates.shape()}},
                                     ctx.attrs()})
                         .status());
  LS_ASSIGN_OR_RETURN(Reduction r, ReadReduction("ScatterND", ctx.attrs()));
  LS_ASSIGN_OR_RETURN(NdGeometry g, ReadNdGeometry("ScatterND", data.shape(), indices.shape(), 0));
  // updates: indices.shape[:-1] + data.shape[k:].
  Shape expected;
  for (int d = 0; d + 1 < indices.shape().rank(); ++d) expected.AddDim(indices.shape().dim(d));
  for (int d = static_cast<int>(g.k); d < data.shape().rank(); ++d) {
    if (!expected.AddDim(data.shape().dim(d))) return InvalidArgument("ScatterND: updates would exceed the maximum rank");
  }
  if (!(updates.shape() == expected)) {
    return InvalidArgument("ScatterND: updates must have shape " + expected.ToString() + ", got " +
                           updates.shape().ToString());
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, data.dtype(), data.shape()));
  if (data.num_elements() > 0) std::memcpy(out->mutable_raw_data(), data.raw_data(), data.byte_size());
  const auto strides = RowMajorStrides(data.shape());
  const int64_t slice = DimsProduct(data.shape(), static_cast<int>(g.k), data.shape().rank());
  const int64_t tuples = DimsProduct(indices.shape(), 0, indices.shape().rank() - 1);
  return DispatchScatter("ScatterND", data.dtype(), r, [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* from = static_cast<const T*>(updates.raw_data());
    T* dst = static_cast<T*>(out->mutable_raw_data());
    for (int64_t t = 0; t < tuples; ++t) {
      LS_ASSIGN_OR_RETURN(int64_t offset, TupleOffset("ScatterND", data, indices, g, t, 0, strides));
      for (int64_t e = 0; e < slice; ++e) Combine(r, dst[offset + e], from[t * slice + e]);
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterGatherScatterOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("GatherElements", 2, InferGatherElements, GatherElementsKernel));
  (void)registry.Register(SimpleOpDef("ScatterElements", 3, InferScatterElements, ScatterElementsKernel));
  (void)registry.Register(SimpleOpDef("GatherND", 2, InferGatherND, GatherNDKernel));
  (void)registry.Register(SimpleOpDef("ScatterND", 3, InferScatterND, ScatterNDKernel));
}

}  // namespace lockstep
