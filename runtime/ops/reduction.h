// The attrs and shapes every reduction shares (Sum and Mean in gradient_ops.cc; Max, Min and
// Prod in reduce_ops.cc): attr "axes" (absent: every axis; an empty list: none; negative
// counts from the end) and attr "keep_dims" (default false: reduced axes are dropped, true:
// they stay as 1s). Instead of the attr, the axes may be a second input, an int vector known
// only at run time (ONNX's form from opset 13 on): empty, it reduces every axis, or none when
// attr "noop_with_empty_axes" is true. Internal to runtime/ops/.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/shape_util.h"
#include "runtime/shape.h"

namespace lockstep {

// Which axes of an input of rank `rank` attr "axes" (or the axes input `axes_input`, when not
// null) reduces.
inline StatusOr<std::array<bool, Shape::kMaxRank>> ReducedAxes(std::string_view op, const AttrMap& attrs, int rank,
                                                               const Tensor* axes_input = nullptr) {
  std::array<bool, Shape::kMaxRank> reduced{};
  IntList given;
  if (axes_input != nullptr) {
    if (attrs.Has("axes")) return InvalidArgument(Str(op) + ": axes given both as an attr and as an input");
    LS_ASSIGN_OR_RETURN(given, ReadIntList(op, "axes", *axes_input, Shape::kMaxRank));
    LS_ASSIGN_OR_RETURN(bool noop, attrs.GetBoolOr("noop_with_empty_axes", false));
    if (given.size == 0 && noop) return reduced;
  }
  if (axes_input == nullptr ? !attrs.Has("axes") : given.size == 0) {
    std::fill(reduced.begin(), reduced.begin() + rank, true);
    return reduced;
  }
  std::span<const int64_t> axes = given.span();
  if (axes_input == nullptr) {
    LS_ASSIGN_OR_RETURN(axes, attrs.GetInts("axes"));
  }
  for (int64_t axis : axes) {
    LS_ASSIGN_OR_RETURN(int a, NormalizeAxis(op, axis, rank));
    reduced[static_cast<size_t>(a)] = true;
  }
  return reduced;
}

// The output shape of reducing `in`; `kept` gets in's shape with the reduced axes set to 1
// (the output's elements in the input's rank, which the kernels index by).
inline StatusOr<Shape> ReductionShape(std::string_view op, const AttrMap& attrs, const Shape& in, Shape* kept,
                                      const Tensor* axes_input = nullptr) {
  LS_ASSIGN_OR_RETURN(auto reduced, ReducedAxes(op, attrs, in.rank(), axes_input));
  LS_ASSIGN_OR_RETURN(bool keep, attrs.GetBoolOr("keep_dims", false));
  Shape out;
  *kept = Shape();
  for (int d = 0; d < in.rank(); ++d) {
    const bool r = reduced[static_cast<size_t>(d)];
    kept->AddDim(r ? 1 : in.dim(d));
    if (!r || keep) out.AddDim(r ? 1 : in.dim(d));
  }
  return out;
}

// The axes input of a reduction's kernel, or null when its axes are an attr.
inline const Tensor* AxesInput(const KernelContext& ctx) { return ctx.num_inputs() > 1 ? &ctx.input(1) : nullptr; }

// Shape inference of a reduction: from the attrs, from the axes input's value when it is a
// constant, else what its length says (keep_dims: the rank; otherwise the rank less the axes,
// all the dimensions unknown).
inline StatusOr<Shape> InferReductionShape(std::string_view op, const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(op, ctx.inputs.size(), 1, 2));
  const Shape& in = ctx.inputs[0].shape;
  Shape kept;
  if (ctx.inputs.size() == 1 || ctx.value(1) != nullptr) return ReductionShape(op, ctx.attrs, in, &kept, ctx.value(1));
  LS_ASSIGN_OR_RETURN(int64_t n, IntVectorLength(op, "axes", ctx.inputs[1]));
  LS_ASSIGN_OR_RETURN(bool keep, ctx.attrs.GetBoolOr("keep_dims", false));
  LS_ASSIGN_OR_RETURN(bool noop, ctx.attrs.GetBoolOr("noop_with_empty_axes", false));
  Shape out;
  const int rank = keep || (n == 0 && noop) ? in.rank() : n < 0 ? -1 : n == 0 ? 0 : in.rank() - static_cast<int>(n);
  if (rank < 0) return InvalidArgument(Str(op) + ": without keep_dims, the number of axes must be known before run time");
  for (int d = 0; d < rank; ++d) out.AddDim(n == 0 && noop ? in.dim(d) : keep && in.dim(d) == 1 ? 1 : -1);
  return out;
}

}  // namespace lockstep
