// Ops that pick elements by their values, with ONNX's semantics: TopK, Hardmax, NonZero,
// Compress, Unique; and ReverseSequence, which reverses each batch entry's first steps. The
// outputs of NonZero, Compress and Unique have sizes that only the values give: shape
// inference leaves them -1. Ties keep the lower index first (TopK, Hardmax, Unique), as the
// spec asks, so every run answers the same.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

int64_t ReadIndexScalar(const Tensor& t) {
  return t.dtype() == DType::kInt32 ? int64_t{t.data<int32_t>()[0]} : t.data<int64_t>()[0];
}

// [outer, length, inner] views of an axis: the element k of line (o, i) is at
// (o * length + k) * inner + i.
struct AxisLines {
  int64_t outer = 1, length = 1, inner = 1;
};

AxisLines LinesOf(const Shape& s, int axis) {
  AxisLines l;
  for (int d = 0; d < axis; ++d) l.outer *= s.dim(d);
  l.length = s.dim(axis);
  for (int d = axis + 1; d < s.rank(); ++d) l.inner *= s.dim(d);
  return l;
}

// Whether a comes before b: larger first (or smaller, for !largest), NaN as the largest, and
// among equals the lower index.
template <typename T>
bool Before(T a, int64_t ia, T b, int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) {
      if (na && nb) return ia < ib;
      return largest ? na : nb;
    }
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// ---- TopK(x, k [1]; axis = -1, largest = true, sorted = true) -> values, indices int64 ----

StatusOr<std::vector<TensorSpec>> InferTopK(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("TopK", ctx.inputs.size(), 2, 2));
  const TensorSpec& x = ctx.inputs[0];
  LS_RETURN_IF_ERROR(CheckDTypeIn("TopK", x.dtype, DTypeSet::kNumeric));
  if (!IsIndexDType(ctx.inputs[1].dtype) || ctx.inputs[1].shape.num_elements() > 1) {
    return InvalidArgument("TopK: k must be one int32 or int64");
  }
  LS_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs.GetIntOr("axis", -1));
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("TopK", axis_attr, x.shape.rank()));
  Shape out = x.shape;
  const Tensor* k = ctx.value(1);
  out.set_dim(axis, k != nullptr && k->num_elements() == 1 ? ReadIndexScalar(*k) : -1);
  if (out.dim(axis) < -1) return InvalidArgument("TopK: k must not be negative");
  return std::vector<TensorSpec>{{x.dtype, out}, {DType::kInt64, out}};
}

Status TopKKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> spec, InferTopK({std::vector<TensorSpec>{{x.dtype(), x.shape()},
                                                                                        {ctx.input(1).dtype(), ctx.input(1).shape()}},
                                                               ctx.attrs()}));
  if (ctx.input(1).num_elements() != 1) return InvalidArgument("TopK: k must be one int32 or int64");
  const int64_t k = ReadIndexScalar(ctx.input(1));
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("TopK", *ctx.attrs().GetIntOr("axis", -1), x.shape().rank()));
  if (k < 0 || k > x.shape().dim(axis)) {
    return InvalidArgument("TopK: k " + std::to_string(k) + " is outside [0, " + std::to_string(x.shape().dim(axis)) + "]");
  }
  LS_ASSIGN_OR_RETURN(bool largest, IntFlag(ctx.attrs(), "largest", true));
  // Sorted or not, the k are answered in order: the spec leaves the unsorted order open.
  LS_RETURN_IF_ERROR(IntFlag(ctx.attrs(), "sorted", true).status());
  Shape out_shape = x.shape();
  out_shape.set_dim(axis, k);
  LS_ASSIGN_OR_RETURN(Tensor * values, ctx.AllocateOutput(0, x.dtype(), out_shape));
  LS_ASSIGN_OR_RETURN(Tensor * indices, ctx.AllocateOutput(1, DType::kInt64, out_shape));
  if (values->num_elements() == 0) return Status::Ok();
  const AxisLines l = LinesOf(x.shape(), axis);
  return DispatchDTypeIn<DTypeSet::kNumeric>(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    T* v = values->mutable_data<T>().data();
    int64_t* idx = indices->mutable_data<int64_t>().data();
    // Grown once per thread to the longest axis seen, then reused: no allocation once warm.
    thread_local std::vector<int64_t> order;
    order.resize(static_cast<size_t>(l.length));
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T* line = src + o * l.length * l.inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
          return Before(line[a * l.inner], a, line[b * l.inner], b, largest);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * l.inner + i;
          idx[at] = order[static_cast<size_t>(j)];
          v[at] = line[order[static_cast<size_t>(j)] * l.inner];
        }
      }
    }
    return Status::Ok();
  });
}

// ---- Hardmax(x): along the last axis, 1 at the first largest element, 0 elsewhere ----

StatusOr<std::vector<TensorSpec>> InferHardmax(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Hardmax", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckDTypeIn("Hardmax", ctx.inputs[0].dtype, DTypeSet::kReal));
  if (ctx.inputs[0].shape.rank() == 0) return InvalidArgument("Hardmax: x must have rank 1 or more");
  return Single(ctx.inputs[0].dtype, ctx.inputs[0].shape);
}

Status HardmaxKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(InferHardmax({std::vector<TensorSpec>{{x.dtype(), x.shape()}}, ctx.attrs()}).status());
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  if (x.num_elements() == 0) return Status::Ok();
  const int64_t width = x.shape().dim(x.shape().rank() - 1);
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    for (int64_t r = 0; r < x.num_elements() / width; ++r) {
      int64_t best = 0;
      for (int64_t j = 1; j < width; ++j) {
        if (Before(src[r * width + j], j, src[r * width + best], best, true)) best = j;
      }
      for (int64_t j = 0; j < width; ++j) dst[r * width + j] = j == best ? T{1} : T{0};
    }
    return Status::Ok();
  });
}

// ---- NonZero(x) -> int64 [rank, count]: the coordinates of the non-zero elements ----

StatusOr<std::vector<TensorSpec>> InferNonZero(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("NonZero", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckDTypeIn("NonZero", ctx.inputs[0].dtype, DTypeSet::kNumericOrBool));
  return Single(DType::kInt64, Shape{ctx.inputs[0].shape.rank(), -1});
}

Status NonZeroKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckDTypeIn("NonZero", x.dtype(), DTypeSet::kNumericOrBool));
  return DispatchDTypeIn<DTypeSet::kNumericOrBool>(x.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const auto v = x.data<T>();
    const int64_t count = std::count_if(v.begin(), v.end(), [](T e) { return e != T{}; });
    const int rank = x.shape().rank();
    LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kInt64, Shape{rank, count}));
    int64_t* dst = out->mutable_data<int64_t>().data();
    const auto strides = RowMajorStrides(x.shape());
    int64_t j = 0;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      if (v[static_cast<size_t>(i)] == T{}) continue;
      int64_t rest = i;
      for (int d = 0; d < rank; ++d) {
        dst[d * count + j] = rest / strides[static_cast<size_t>(d)];
        rest %= strides[static_cast<size_t>(d)];
      }
      ++j;
    }
    return Status::Ok();
  });
}

// ---- Compress(x, condition bool [n]; axis?) ----
//
// The slices along `axis` whose condition is true (x flattened without an axis); a condition
// shorter than the axis leaves the rest out.

StatusOr<std::vector<TensorSpec>> InferCompress(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Compress", ctx.inputs.size(), 2, 2));
  const TensorSpec& x = ctx.inputs[0];
  LS_RETURN_IF_ERROR(CheckDTypeIn("Compress", x.dtype, DTypeSet::kNonString));
  LS_RETURN_IF_ERROR(CheckDType("Compress", "condition", ctx.inputs[1].dtype, DType::kBool));
  LS_RETURN_IF_ERROR(CheckRank("Compress", "condition", ctx.inputs[1].shape, 1));
  if (!ctx.attrs.Has("axis")) return Single(x.dtype, Shape{-1});
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Compress", *ctx.attrs.GetIntOr("axis", 0), x.shape.rank()));
  Shape out = x.shape;
  out.set_dim(axis, -1);
  return Single(x.dtype, out);
}

Status CompressKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& condition = ctx.input(1);
  LS_RETURN_IF_ERROR(InferCompress({std::vector<TensorSpec>{{x.dtype(), x.shape()}, {condition.dtype(), condition.shape()}},
                                    ctx.attrs()})
                         .status());
  const bool flat = !ctx.attrs().Has("axis");
  const Shape shape = flat ? Shape{x.num_elements()} : x.shape();
  LS_ASSIGN_OR_RETURN(int axis, flat ? StatusOr<int>(0) : NormalizeAxis("Compress", *ctx.attrs().GetIntOr("axis", 0), shape.rank()));
  const AxisLines l = LinesOf(shape, axis);
  if (condition.num_elements() > l.length) {
    return InvalidArgument("Compress: condition has " + std::to_string(condition.num_elements()) +
                           " values for an axis of " + std::to_string(l.length));
  }
  const auto keep = condition.data<bool>();
  const int64_t kept = std::count(keep.begin(), keep.end(), true);
  Shape out_shape = shape;
  out_shape.set_dim(axis, kept);
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  const size_t slice = static_cast<size_t>(l.inner) * DTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(out->mutable_raw_data());
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t k = 0; k < condition.num_elements(); ++k) {
      if (!keep[static_cast<size_t>(k)]) continue;
      std::memcpy(dst, src + static_cast<size_t>(o * l.length + k) * slice, slice);
      dst += slice;
    }
  }
  return Status::Ok();
}

// ---- Unique(x; axis?, sorted = true) -> y, indices, inverse_indices, counts (int64) ----
//
// The distinct elements of x (flattened), or its distinct slices along `axis`, in ascending
// order (lexicographic for slices) or, unsorted, in the order they first appear; with where
// each first appears, which of them each element or slice of x is, and how often each appears.

StatusOr<std::vector<TensorSpec>> InferUnique(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Unique", ctx.inputs.size(), 1, 1));
  const TensorSpec& x = ctx.inputs[0];
  LS_RETURN_IF_ERROR(CheckDTypeIn("Unique", x.dtype, DTypeSet::kNumericOrBool));
  LS_RETURN_IF_ERROR(IntFlag(ctx.attrs, "sorted", true).status());
  Shape y{-1};
  int64_t along = x.shape.num_elements();
  if (ctx.attrs.Has("axis")) {
    LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Unique", *ctx.attrs.GetIntOr("axis", 0), x.shape.rank()));
    y = x.shape;
    y.set_dim(axis, -1);
    along = x.shape.dim(axis);
  }
  return std::vector<TensorSpec>{{x.dtype, y}, {DType::kInt64, Shape{-1}}, {DType::kInt64, Shape{along}},
                                 {DType::kInt64, Shape{-1}}};
}

Status UniqueKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(InferUnique({std::vector<TensorSpec>{{x.dtype(), x.shape()}}, ctx.attrs()}).status());
  LS_ASSIGN_OR_RETURN(bool sorted, IntFlag(ctx.attrs(), "sorted", true));
  const bool flat = !ctx.attrs().Has("axis");
  const Shape shape = flat ? Shape{x.num_elements()} : x.shape();
  LS_ASSIGN_OR_RETURN(int axis, flat ? StatusOr<int>(0) : NormalizeAxis("Unique", *ctx.attrs().GetIntOr("axis", 0), shape.rank()));
  const AxisLines l = LinesOf(shape, axis);
  return DispatchDTypeIn<DTypeSet::kNumericOrBool>(x.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    // Slice s is the elements (o, s, i) for every o and i, compared in that order.
    auto less = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < l.outer; ++o) {
        for (int64_t i = 0; i < l.inner; ++i) {
          const T va = src[(o * l.length + a) * l.inner + i], vb = src[(o * l.length + b) * l.inner + i];
          if (va != vb) return va < vb;
        }
      }
      return false;
    };
    auto equal = [&](int64_t a, int64_t b) { return !less(a, b) && !less(b, a); };
    // Slices in order (stable: the first of equals first), then one per run of equals.
    std::vector<int64_t> order(static_cast<size_t>(l.length));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), less);
    std::vector<int64_t> firsts, counts, inverse(static_cast<size_t>(l.length));
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || !equal(order[k - 1], order[k])) {
        firsts.push_back(order[k]);
        counts.push_back(0);
      }
      inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(firsts.size() - 1);
      ++counts.back();
    }
    if (!sorted) {
      // The order of first appearance, and the inverse renumbered to it.
      std::vector<size_t> by_first(firsts.size());
      std::iota(by_first.begin(), by_first.end(), size_t{0});
      std::sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) { return firsts[a] < firsts[b]; });
      std::vector<int64_t> renumber(firsts.size()), f2(firsts.size()), c2(firsts.size());
      for (size_t j = 0; j < by_first.size(); ++j) {
        renumber[by_first[j]] = static_cast<int64_t>(j);
        f2[j] = firsts[by_first[j]];
        c2[j] = counts[by_first[j]];
      }
      firsts = std::move(f2);
      counts = std::move(c2);
      for (int64_t& v : inverse) v = renumber[static_cast<size_t>(v)];
    }
    const int64_t n = static_cast<int64_t>(firsts.size());
    Shape y_shape = shape;
    y_shape.set_dim(axis, n);
    LS_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), y_shape));
    T* dst = y->mutable_data<T>().data();
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < n; ++j) {
        std::copy_n(src + (o * l.length + firsts[static_cast<size_t>(j)]) * l.inner, l.inner,
                    dst + (o * n + j) * l.inner);
      }
    }
    auto put = [&](int index, const std::vector<int64_t>& values) -> Status {
      LS_ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(index, DType::kInt64, Shape{static_cast<int64_t>(values.size())}));
      std::copy(values.begin(), values.end(), t->mutable_data<int64_t>().begin());
      return Status::Ok();
    };
    LS_RETURN_IF_ERROR(put(1, firsts));
    LS_RETURN_IF_ERROR(put(2, inverse));
    return put(3, counts);
  });
}

// ---- ReverseSequence(x, sequence_lens int64 [batch]; batch_axis = 1, time_axis = 0) ----

StatusOr<std::vector<TensorSpec>> InferReverseSequence(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("ReverseSequence", ctx.inputs.size(), 2, 2));
  const TensorSpec& x = ctx.inputs[0];
  LS_RETURN_IF_ERROR(CheckDTypeIn("ReverseSequence", x.dtype, DTypeSet::kNonString));
  if (!IsIndexDType(ctx.inputs[1].dtype)) return InvalidArgument("ReverseSequence: sequence_lens must be int32 or int64");
  LS_RETURN_IF_ERROR(CheckRank("ReverseSequence", "sequence_lens", ctx.inputs[1].shape, 1));
  if (x.shape.rank() < 2) return InvalidArgument("ReverseSequence: x must have rank 2 or more");
  LS_ASSIGN_OR_RETURN(int64_t batch, ctx.attrs.GetIntOr("batch_axis", 1));
  LS_ASSIGN_OR_RETURN(int64_t time, ctx.attrs.GetIntOr("time_axis", 0));
  if (!((batch == 0 && time == 1) || (batch == 1 && time == 0))) {
    return InvalidArgument("ReverseSequence: batch_axis and time_axis must be 0 and 1, in either order");
  }
  return Single(x.dtype, x.shape);
}

Status ReverseSequenceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  LS_RETURN_IF_ERROR(InferReverseSequence({std::vector<TensorSpec>{{x.dtype(), x.shape()}, {lens.dtype(), lens.shape()}},
                                           ctx.attrs()})
                         .status());
  const int batch_axis = static_cast<int>(*ctx.attrs().GetIntOr("batch_axis", 1));
  const int time_axis = 1 - batch_axis;
  const int64_t batch = x.shape().dim(batch_axis), steps = x.shape().dim(time_axis);
  if (lens.num_elements() != batch) {
    return InvalidArgument("ReverseSequence: sequence_lens has " + std::to_string(lens.num_elements()) +
                           " values for a batch of " + std::to_string(batch));
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  const int64_t inner = x.shape().dim(0) == 0 || x.shape().dim(1) == 0 ? 0 : x.num_elements() / (batch * steps);
  const size_t bytes = static_cast<size_t>(inner) * DTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(out->mutable_raw_data());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens.dtype() == DType::kInt32 ? int64_t{lens.data<int32_t>()[static_cast<size_t>(b)]}
                                                      : lens.data<int64_t>()[static_cast<size_t>(b)];
    if (len < 0 || len > steps) {
      return InvalidArgument("ReverseSequence: length " + std::to_string(len) + " of batch entry " + std::to_string(b) +
                             " is outside [0, " + std::to_string(steps) + "]");
    }
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t from = t < len ? len - 1 - t : t;
      auto at = [&](int64_t step) {
        return static_cast<size_t>(batch_axis == 0 ? b * steps + step : step * batch + b) * bytes;
      };
      std::memcpy(dst + at(t), src + at(from), bytes);
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterSelectOps(OpRegistry& registry) {
  OpDef topk = SimpleOpDef("TopK", 2, InferTopK, TopKKernel);
  topk.num_outputs = 2;
  (void)registry.Register(std::move(topk));
  (void)registry.Register(SimpleOpDef("Hardmax", 1, InferHardmax, HardmaxKernel));
  OpDef nonzero = SimpleOpDef("NonZero", 1, InferNonZero, NonZeroKernel);
  (void)registry.Register(std::move(nonzero));
  (void)registry.Register(SimpleOpDef("Compress", 2, InferCompress, CompressKernel));
  OpDef unique = SimpleOpDef("Unique", 1, InferUnique, UniqueKernel);
  unique.num_outputs = 4;
  (void)registry.Register(std::move(unique));
  (void)registry.Register(SimpleOpDef("ReverseSequence", 2, InferReverseSequence, ReverseSequenceKernel));
}

}  // namespace lockstep
