// Slice and Pad, with ONNX's semantics (registered with the shape ops by RegisterShapeOps in
// shape_ops.cc). Both take their geometry as int32/int64 vector inputs, which may be computed
// at run time: shape inference gives exact sizes where they are constants and knows the rank
// only where they are not, and the kernels clamp or check values. A Slice with constant
// bounds and steps of 1 has a gradient (dy padded back with zeros).
// Any dtype for Slice (strings included); Pad takes every dtype but strings.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

// The dimensions of `in` that values unknown to shape inference may change: -1, except those
// of size 0, which stay 0 (slicing or tiling nothing gives nothing).
Shape UnknownSizes(const Shape& in, int count) {
  Shape out = in;
  for (int d = 0; d < count; ++d) out.set_dim(d, in.dim(d) == 0 ? 0 : -1);
  return out;
}

// ---- Slice(data, starts, ends, axes?, steps?) ----
//
// For each i: axis axes[i] (default i; negative counts from the end; no axis twice) keeps
// elements starts[i], starts[i] + steps[i], ... short of ends[i] (steps default 1, never 0).
// Negative starts and ends count from the end; then, as the ONNX spec says, a start is
// clamped to [0, dim] for a positive step and [0, dim - 1] for a negative one, an end to
// [0, dim] and [-1, dim - 1]. So INT64_MAX (positive steps) and INT64_MIN (negative ones) mean
// "to the end".

struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};
using SlicePlan = std::array<SliceAxis, Shape::kMaxRank>;

// How many elements a slice of `dim` takes, from `start` (clamped) by `step`.
SliceAxis ClampSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceAxis s;
  s.step = step;
  // |step| as unsigned: INT64_MIN has no positive int64.
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  if (step > 0) {
    s.start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end > s.start) s.count = static_cast<int64_t>((static_cast<uint64_t>(end - s.start) - 1) / stride + 1);
  } else if (dim > 0) {
    s.start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    if (s.start > end) s.count = static_cast<int64_t>((static_cast<uint64_t>(s.start - end) - 1) / stride + 1);
  }
  if (s.count <= 1) s.step = 1;  // one element or none: the step moves nowhere (and cannot overflow an offset)
  return s;
}

// The slice of `in` that `bounds` (starts, ends, axes?, steps?) take. An unknown (-1) dimension
// of `in` gives a count of -1 on that axis.
StatusOr<SlicePlan> PlanSlice(const Shape& in, std::span<const Tensor* const> bounds) {
  const int rank = in.rank();
  LS_ASSIGN_OR_RETURN(IntList starts, ReadIntList("Slice", "starts", *bounds[0], Shape::kMaxRank));
  LS_ASSIGN_OR_RETURN(IntList ends, ReadIntList("Slice", "ends", *bounds[1], Shape::kMaxRank));
  IntList axes, steps;
  axes.size = steps.size = starts.size;
  for (int i = 0; i < starts.size; ++i) {
    axes.values[static_cast<size_t>(i)] = i;
    steps.values[static_cast<size_t>(i)] = 1;
  }
  if (bounds.size() > 2) {
    LS_ASSIGN_OR_RETURN(axes, ReadIntList("Slice", "axes", *bounds[2], Shape::kMaxRank));
  }
  if (bounds.size() > 3) {
    LS_ASSIGN_OR_RETURN(steps, ReadIntList("Slice", "steps", *bounds[3], Shape::kMaxRank));
  }
  if (ends.size != starts.size || axes.size != starts.size || steps.size != starts.size) {
    return InvalidArgument("Slice: starts, ends, axes and steps have " + std::to_string(starts.size) + ", " +
                           std::to_string(ends.size) + ", " + std::to_string(axes.size) + " and " +
                           std::to_string(steps.size) + " values");
  }
  SlicePlan plan;
  for (int d = 0; d < rank; ++d) plan[static_cast<size_t>(d)].count = in.dim(d);
  std::array<bool, Shape::kMaxRank> seen{};
  for (int i = 0; i < starts.size; ++i) {
    LS_ASSIGN_OR_RETURN(int a, NormalizeAxis("Slice", axes[i], rank));
    if (seen[static_cast<size_t>(a)]) {
      return InvalidArgument("Slice: axes " + IntsString(axes.span()) + " repeat an axis");
    }
    seen[static_cast<size_t>(a)] = true;
    if (steps[i] == 0) return InvalidArgument("Slice: steps " + IntsString(steps.span()) + " has a 0");
    plan[static_cast<size_t>(a)] =
        in.dim(a) < 0 ? SliceAxis{0, 1, -1} : ClampSlice(in.dim(a), starts[i], ends[i], steps[i]);
  }
  return plan;
}

StatusOr<std::vector<TensorSpec>> InferSlice(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Slice", ctx.inputs.size(), 3, 5));
  const char* names[] = {"data", "starts", "ends", "axes", "steps"};
  int64_t n = -1;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    LS_ASSIGN_OR_RETURN(int64_t len, IntVectorLength("Slice", names[i], ctx.inputs[i]));
    if (!MergeDim(n, len, &n)) {
      return InvalidArgument("Slice: " + Str(names[i]) + " has " + std::to_string(len) + " values, the others " +
                             std::to_string(n));
    }
  }
  const Shape& in = ctx.inputs[0].shape;
  if (n > in.rank()) {
    return InvalidArgument("Slice: " + std::to_string(n) + " axes to slice in an input of rank " +
                           std::to_string(in.rank()));
  }
  // Constant bounds: the exact slice, where the input's dimensions are known.
  std::array<const Tensor*, 4> bounds{};
  size_t given = 0;
  for (size_t i = 1; i < ctx.inputs.size() && ctx.value(i) != nullptr; ++i) bounds[given++] = ctx.value(i);
  if (given == ctx.inputs.size() - 1) {
    LS_ASSIGN_OR_RETURN(SlicePlan plan, PlanSlice(in, std::span<const Tensor* const>(bounds.data(), given)));
    Shape out;
    for (int d = 0; d < in.rank(); ++d) out.AddDim(plan[static_cast<size_t>(d)].count);
    return Single(ctx.inputs[0].dtype, out);
  }
  // Without axes, the first n are sliced; with them, any may be.
  const bool axes_known = ctx.inputs.size() < 4 && n >= 0;
  return Single(ctx.inputs[0].dtype, UnknownSizes(in, axes_known ? static_cast<int>(n) : in.rank()));
}


Status SliceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& in = x.shape();
  std::array<const Tensor*, 4> bounds{};
  for (int i = 1; i < ctx.num_inputs(); ++i) bounds[static_cast<size_t>(i - 1)] = &ctx.input(i);
  LS_ASSIGN_OR_RETURN(SlicePlan plan,
                      PlanSlice(in, std::span<const Tensor* const>(bounds.data(), static_cast<size_t>(ctx.num_inputs() - 1))));
  Shape out_shape;
  for (int d = 0; d < in.rank(); ++d) out_shape.AddDim(plan[static_cast<size_t>(d)].count);
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  if (out->num_elements() == 0) return Status::Ok();
  // Output rows (the innermost axis) walk the input by step * stride along each axis, from the
  // first element taken.
  const auto strides = RowMajorStrides(in);
  int64_t first = 0;
  SourceWalker rows;
  for (int d = 0; d < in.rank(); ++d) {
    const SliceAxis& s = plan[static_cast<size_t>(d)];
    first += s.start * strides[static_cast<size_t>(d)];
    if (d + 1 < in.rank()) rows.AddDim(s.count, s.count, s.step * strides[static_cast<size_t>(d)]);
  }
  const int64_t width = in.rank() == 0 ? 1 : out_shape.dim(in.rank() - 1);
  const int64_t step = in.rank() == 0 ? 1 : plan[static_cast<size_t>(in.rank() - 1)].step;
  return DispatchCopyType("Slice", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = CopyData<T>(x) + first;
    T* dst = MutableCopyData<T>(*out);
    ctx.pool().ParallelFor(out->num_elements() / width, std::max<int64_t>(1, kElementGrain / width),
                           [&](int64_t begin, int64_t end) {
      SourceWalker walk = rows;
      walk.Seek(begin);
      for (int64_t r = begin; r < end; ++r, walk.Next()) {
        const T* from = src + walk.offset();
        T* to = dst + r * width;
        if (step == 1) {
          std::copy_n(from, width, to);
        } else {
          for (int64_t k = 0; k < width; ++k) to[k] = from[k * step];
        }
      }
    });
    return Status::Ok();
  });
}

// ---- Pad(data, pads int32/int64 [begin_0, ..., begin_{n-1}, end_0, ..., end_{n-1}];
// attrs "mode" = constant | reflect | edge, "value" = 0 (constant mode's fill)) ----
//
// A negative pad removes that many elements from that side first (ONNX allows it); the
// padding then reflects or repeats the edge of what remains. "reflect" mirrors about the
// edge element without repeating it (numpy's "reflect"), periodically when the pad is longer
// than the axis; reflect and edge need at least one element to copy.

enum class PadMode { kConstant, kReflect, kEdge };

StatusOr<PadMode> ReadPadMode(const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view mode, attrs.GetStringViewOr("mode", "constant"));
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  return InvalidArgument("Pad: attr 'mode' must be constant, reflect or edge, got '" + Str(mode) + "'");
}

Status CheckPadDType(DType dtype) {
  if (dtype == DType::kString || dtype == DType::kInvalid) {
    return InvalidArgument("Pad: dtype " + Str(DTypeName(dtype)) + " is not supported");
  }
  return Status::Ok();
}

StatusOr<std::vector<TensorSpec>> InferPad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Pad", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckPadDType(ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(ReadPadMode(ctx.attrs).status());
  LS_RETURN_IF_ERROR(ctx.attrs.GetFloatOr("value", 0.0).status());
  const Shape& in = ctx.inputs[0].shape;
  LS_ASSIGN_OR_RETURN(int64_t n, IntVectorLength("Pad", "pads", ctx.inputs[1]));
  if (n >= 0 && n != 2 * in.rank()) {
    return InvalidArgument("Pad: pads has " + std::to_string(n) + " values for an input of rank " +
                           std::to_string(in.rank()) + " (two per axis)");
  }
  Shape out;
  // Constant pads: the exact size of each dimension that is known.
  std::optional<IntList> pads;
  if (ctx.value(1) != nullptr) {
    LS_ASSIGN_OR_RETURN(pads, ReadIntList("Pad", "pads", *ctx.value(1), 2 * Shape::kMaxRank));
  }
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t size = pads && in.dim(d) >= 0 ? in.dim(d) + (*pads)[d] + (*pads)[d + in.rank()] : -1;
    if (pads && in.dim(d) >= 0 && size < 0) {
      return InvalidArgument("Pad: pads " + IntsString(pads->span()) + " crop more than axis " + std::to_string(d) +
                             "'s " + std::to_string(in.dim(d)) + " elements");
    }
    out.AddDim(size);
  }
  return Single(ctx.inputs[0].dtype, out);
}

// One axis of a pad: output index j reads index j - lead of the `kept` elements that remain
// after cropping, which start `crop` elements into the input.
struct PadAxis {
  int64_t lead = 0, crop = 0, kept = 0, out = 0;
};

// The input index output index j reads along `a`, or -1 for the fill value.
int64_t PadSource(const PadAxis& a, PadMode mode, int64_t j) {
  int64_t v = j - a.lead;
  if (v < 0 || v >= a.kept) {
    if (mode == PadMode::kConstant) return -1;
    if (mode == PadMode::kEdge) {
      v = std::clamp<int64_t>(v, 0, a.kept - 1);
    } else if (a.kept == 1) {
      v = 0;
    } else {
      const int64_t period = 2 * (a.kept - 1);
      v = ((v % period) + period) % period;
      if (v >= a.kept) v = period - v;
    }
  }
  return a.crop + v;
}

StatusOr<PadAxis> PlanPadAxis(int64_t dim, int64_t begin, int64_t end, PadMode mode) {
  // Past these bounds the output would be negative or beyond any tensor's size; checking
  // first keeps the arithmetic below from overflowing.
  if (begin < -dim || end < -dim || begin > Shape::kMaxElements || end > Shape::kMaxElements) {
    return InvalidArgument("Pad: pads " + std::to_string(begin) + ", " + std::to_string(end) +
                           " do not fit an axis of " + std::to_string(dim));
  }
  PadAxis a;
  a.lead = std::max<int64_t>(begin, 0);
  a.crop = std::max<int64_t>(-begin, 0);
  a.kept = dim - a.crop - std::max<int64_t>(-end, 0);
  a.out = dim + begin + end;
  if (a.kept < 0) {
    return InvalidArgument("Pad: pads " + std::to_string(begin) + ", " + std::to_string(end) +
                           " remove more than the " + std::to_string(dim) + " elements of an axis");
  }
  if (a.kept == 0 && a.out > 0 && mode != PadMode::kConstant) {
    return InvalidArgument("Pad: reflect and edge padding need at least one element to copy");
  }
  return a;
}

template <typename T>
void PadRows(ThreadPool& pool, const T* src, T* dst, const Shape& in, const std::array<PadAxis, Shape::kMaxRank>& axes,
             PadMode mode, T fill, int64_t rows) {
  const int rank = in.rank();
  const auto strides = RowMajorStrides(in);
  const PadAxis inner = rank == 0 ? PadAxis{0, 0, 1, 1} : axes[static_cast<size_t>(rank - 1)];
  const int64_t width = inner.out;
  pool.ParallelFor(rows, std::max<int64_t>(1, kElementGrain / width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* to = dst + r * width;
      // Where this row comes from: every outer axis maps its index, or the row is all fill.
      int64_t from = 0, rest = r;
      bool filled = false;
      for (int d = rank - 2; d >= 0; --d) {
        const PadAxis& a = axes[static_cast<size_t>(d)];
        const int64_t source = PadSource(a, mode, rest % a.out);
        rest /= a.out;
        filled = filled || source < 0;
        from += source * strides[static_cast<size_t>(d)];
      }
      if (filled) {
        std::fill_n(to, width, fill);
        continue;
      }
      const T* row = src + from;
      const int64_t middle_end = std::min(width, inner.lead + inner.kept);
      for (int64_t j = 0; j < width; ++j) {
        if (j == inner.lead && j < middle_end) {  // the elements that stay, in one copy
          std::copy_n(row + inner.crop, middle_end - j, to + j);
          j = middle_end - 1;
          continue;
        }
        const int64_t source = PadSource(inner, mode, j);
        to[j] = source < 0 ? fill : row[source];
      }
    }
  });
}

Status PadKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& in = x.shape();
  LS_RETURN_IF_ERROR(CheckPadDType(x.dtype()));
  LS_ASSIGN_OR_RETURN(PadMode mode, ReadPadMode(ctx.attrs()));
  LS_ASSIGN_OR_RETURN(double value, ctx.attrs().GetFloatOr("value", 0.0));
  LS_ASSIGN_OR_RETURN(IntList pads, ReadIntList("Pad", "pads", ctx.input(1), 2 * Shape::kMaxRank));
  if (pads.size != 2 * in.rank()) {
    return InvalidArgument("Pad: pads " + IntsString(pads.span()) + " does not fit an input of rank " +
                           std::to_string(in.rank()) + " (two per axis)");
  }
  std::array<PadAxis, Shape::kMaxRank> axes{};
  IntList dims;
  dims.size = in.rank();
  for (int d = 0; d < in.rank(); ++d) {
    LS_ASSIGN_OR_RETURN(axes[static_cast<size_t>(d)], PlanPadAxis(in.dim(d), pads[d], pads[d + in.rank()], mode));
    dims.values[static_cast<size_t>(d)] = axes[static_cast<size_t>(d)].out;
  }
  LS_ASSIGN_OR_RETURN(Shape out_shape, ShapeFromValues("Pad", dims.span()));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  if (out->num_elements() == 0) return Status::Ok();
  const int64_t width = in.rank() == 0 ? 1 : out_shape.dim(in.rank() - 1);
  return DispatchCopyType("Pad", x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    PadRows<T>(ctx.pool(), CopyData<T>(x), MutableCopyData<T>(*out), in, axes, mode, ElementBits<T>(x.dtype(), value),
               out->num_elements() / width);
    return Status::Ok();
  });
}

// The gradient of a slice with constant bounds and steps of 1 (a group's channels, a
// window's crop): dy padded with zeros back to x's shape.
Status SliceGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  if (!g.needs_input_grad(0)) return Status::Ok();
  std::array<const Tensor*, 4> bounds{};
  for (int i = 1; i < g.num_inputs(); ++i) {
    bounds[static_cast<size_t>(i - 1)] = g.constant_input(i);
    if (bounds[static_cast<size_t>(i - 1)] == nullptr) {
      return Unimplemented("the gradient of a Slice whose bounds are computed, not constants");
    }
  }
  const Shape& in = g.input_spec(0).shape;
  LS_ASSIGN_OR_RETURN(SlicePlan plan,
                      PlanSlice(in, std::span<const Tensor* const>(bounds.data(), static_cast<size_t>(g.num_inputs() - 1))));
  // The axes sliced: those named, or the first as many as there are starts. Only their sizes
  // must be known (an unsliced batch of -1 pads by nothing).
  std::array<bool, Shape::kMaxRank> sliced{};
  LS_ASSIGN_OR_RETURN(IntList starts, ReadIntList("Slice", "starts", *bounds[0], Shape::kMaxRank));
  for (int i = 0; i < starts.size; ++i) {
    int64_t axis = i;
    if (bounds[2] != nullptr) {
      LS_ASSIGN_OR_RETURN(IntList axes, ReadIntList("Slice", "axes", *bounds[2], Shape::kMaxRank));
      axis = axes[i];
    }
    LS_ASSIGN_OR_RETURN(int a, NormalizeAxis("Slice", axis, in.rank()));
    sliced[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> pads(2 * static_cast<size_t>(in.rank()));
  for (int d = 0; d < in.rank(); ++d) {
    if (!sliced[static_cast<size_t>(d)]) continue;
    const SliceAxis& a = plan[static_cast<size_t>(d)];
    if (in.dim(d) < 0) {
      return Unimplemented("the gradient of a Slice along axis " + std::to_string(d) + " of " + in.ToString() +
                           ", whose size is unknown");
    }
    if (a.step != 1) return Unimplemented("the gradient of a Slice with a step other than 1");
    pads[static_cast<size_t>(d)] = a.start;
    pads[static_cast<size_t>(d + in.rank())] = in.dim(d) - a.start - a.count;
  }
  const std::string shape = g.Constant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(pads.size())}, pads));
  g.SetInputGrad(0, g.Op("Pad", {g.output_grad(0), shape}));
  return Status::Ok();
}

}  // namespace

void RegisterSliceOps(OpRegistry& registry) {
  OpDef slice;
  slice.name = "Slice";
  slice.min_inputs = 3;
  slice.max_inputs = 5;
  slice.infer = InferSlice;
  slice.compute = SliceKernel;
  slice.gradient = SliceGrad;
  (void)registry.Register(std::move(slice));
  (void)registry.Register(SimpleOpDef("Pad", 2, InferPad, PadKernel));
}

}  // namespace lockstep
