// The attrs and shapes every reduction shares (Sum and Mean in gradient_ops.cc; Max, Min and
// Prod in reduce_ops.cc): attr "axes" (absent: every axis; an empty list: none; negative
// counts from the end) and attr "keep_dims" (default false: reduced axes are dropped, true:
// they stay as 1s). Internal to runtime/ops/.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "runtime/attr.h"
#include "runtime/ops/op_util.h"
#include "runtime/shape.h"

namespace lockstep {

// Which axes of an input of rank `rank` attr "axes" reduces.
inline StatusOr<std::array<bool, Shape::kMaxRank>> ReducedAxes(std::string_view op, const AttrMap& attrs, int rank) {
  std::array<bool, Shape::kMaxRank> reduced{};
  if (!attrs.Has("axes")) {
    std::fill(reduced.begin(), reduced.begin() + rank, true);
    return reduced;
  }
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> axes, attrs.GetInts("axes"));
  for (int64_t axis : axes) {
    LS_ASSIGN_OR_RETURN(int a, NormalizeAxis(op, axis, rank));
    reduced[static_cast<size_t>(a)] = true;
  }
  return reduced;
}

// The output shape of reducing `in`; `kept` gets in's shape with the reduced axes set to 1
// (the output's elements in the input's rank, which the kernels index by).
inline StatusOr<Shape> ReductionShape(std::string_view op, const AttrMap& attrs, const Shape& in, Shape* kept) {
  LS_ASSIGN_OR_RETURN(auto reduced, ReducedAxes(op, attrs, in.rank()));
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

}  // namespace lockstep
