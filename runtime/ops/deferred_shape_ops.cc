// Shape arithmetic an importer leaves to run time when a dimension it needs is unknown at load:
// each op reads a shape (Shape's output) and computes what the importer would have written as
// a constant had it known that shape. Errors name the shape, so that a request whose input does
// not fit is told why (the session adds the node).
//
//   SplitSizes(shape; axis, parts, uneven) -> int64 [parts]: the sizes of an equal split of
//     shape[axis]. Not `uneven` (ONNX's Split before opset 18): the dimension must divide by
//     `parts`. `uneven` (opset 18's num_outputs): each part ceil(dim / parts), the last what
//     remains, which must not be below 0.
//   WindowPads(shape; extents, strides, pads, auto_pad, ceil_mode) -> int64 [2 * rank]: ONNX's
//     padding of a window op over the trailing spatial axes of `shape`, in Pad's form (every
//     axis's begin, then every axis's end; the leading axes 0), as runtime/window_pads.h
//     computes it.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/shape_util.h"
#include "runtime/window_pads.h"

namespace lockstep {
namespace {

StatusOr<IntList> ReadShapeValues(std::string_view op, const Tensor& t) {
  LS_ASSIGN_OR_RETURN(IntList shape, ReadIntList(op, "the shape input", t, Shape::kMaxRank));
  for (int i = 0; i < shape.size; ++i) {
    if (shape[i] < 0) return InvalidArgument(Str(op) + ": shape " + IntsString(shape.span()) + " has a negative dimension");
  }
  return shape;
}

// ---- SplitSizes ----

StatusOr<int64_t> SplitParts(const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(int64_t parts, attrs.GetInt("parts"));
  if (parts < 1 || parts > (int64_t{1} << 20)) {
    return InvalidArgument("SplitSizes: parts must be in [1, 2^20], got " + std::to_string(parts));
  }
  return parts;
}

StatusOr<std::vector<TensorSpec>> InferSplitSizes(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("SplitSizes", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(IntVectorLength("SplitSizes", "the shape input", ctx.inputs[0]).status());
  LS_RETURN_IF_ERROR(ctx.attrs.GetInt("axis").status());
  LS_RETURN_IF_ERROR(ctx.attrs.GetBoolOr("uneven", false).status());
  LS_ASSIGN_OR_RETURN(int64_t parts, SplitParts(ctx.attrs));
  return Single(DType::kInt64, Shape{parts});
}

Status SplitSizesKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(IntList shape, ReadShapeValues("SplitSizes", ctx.input(0)));
  LS_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.attrs().GetInt("axis"));
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("SplitSizes", axis_attr, shape.size));
  LS_ASSIGN_OR_RETURN(bool uneven, ctx.attrs().GetBoolOr("uneven", false));
  LS_ASSIGN_OR_RETURN(int64_t parts, SplitParts(ctx.attrs()));
  const int64_t dim = shape[axis];
  const int64_t part = uneven ? (dim + parts - 1) / parts : dim / parts;
  const int64_t last = dim - part * (parts - 1);
  if ((!uneven && dim % parts != 0) || last < 0) {
    return InvalidArgument("SplitSizes: dimension " + std::to_string(axis) + " of " + IntsString(shape.span()) + " (" +
                           std::to_string(dim) + ") does not split into " + std::to_string(parts) +
                           (uneven ? " parts" : " equal parts"));
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kInt64, Shape{parts}));
  int64_t* sizes = out->mutable_data<int64_t>().data();
  for (int64_t k = 0; k + 1 < parts; ++k) sizes[k] = part;
  sizes[parts - 1] = last;
  return Status::Ok();
}

// ---- WindowPads ----

struct WindowAttrs {
  std::span<const int64_t> extents, strides, pads;
  AutoPad mode = AutoPad::kNotSet;
  bool ceil_mode = false;
};

StatusOr<WindowAttrs> ReadWindowAttrs(const AttrMap& attrs) {
  WindowAttrs w;
  LS_ASSIGN_OR_RETURN(w.extents, attrs.GetInts("extents"));
  LS_ASSIGN_OR_RETURN(w.strides, attrs.GetInts("strides"));
  LS_ASSIGN_OR_RETURN(w.pads, attrs.GetInts("pads"));
  LS_ASSIGN_OR_RETURN(std::string_view mode, attrs.GetStringViewOr("auto_pad", "NOTSET"));
  LS_ASSIGN_OR_RETURN(w.ceil_mode, attrs.GetBoolOr("ceil_mode", false));
  const size_t n = w.extents.size();
  if (n < 1 || n > 3 || w.strides.size() != n || w.pads.size() != 2 * n) {
    return InvalidArgument("WindowPads: extents " + IntsString(w.extents) + ", strides " + IntsString(w.strides) +
                           " and pads " + IntsString(w.pads) + " must cover the same 1 to 3 axes");
  }
  for (size_t d = 0; d < n; ++d) {
    if (w.extents[d] < 1 || w.strides[d] < 1 || w.pads[d] < 0 || w.pads[n + d] < 0 ||
        std::max({w.extents[d], w.strides[d], w.pads[d], w.pads[n + d]}) > (int64_t{1} << 40)) {
      return InvalidArgument("WindowPads: extents " + IntsString(w.extents) + ", strides " + IntsString(w.strides) +
                             " or pads " + IntsString(w.pads) + " out of range");
    }
  }
  if (mode == "NOTSET") w.mode = AutoPad::kNotSet;
  else if (mode == "SAME_UPPER") w.mode = AutoPad::kSameUpper;
  else if (mode == "SAME_LOWER") w.mode = AutoPad::kSameLower;
  else if (mode == "VALID") w.mode = AutoPad::kValid;
  else return InvalidArgument("WindowPads: auto_pad '" + std::string(mode) + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  return w;
}

StatusOr<std::vector<TensorSpec>> InferWindowPads(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("WindowPads", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(int64_t rank, IntVectorLength("WindowPads", "the shape input", ctx.inputs[0]));
  LS_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(ctx.attrs));
  if (rank >= 0 && rank < static_cast<int64_t>(w.extents.size())) {
    return InvalidArgument("WindowPads: a shape of " + std::to_string(rank) + " dimensions has no " +
                           std::to_string(w.extents.size()) + " spatial axes");
  }
  return Single(DType::kInt64, Shape{rank < 0 ? -1 : 2 * rank});
}

Status WindowPadsKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(IntList shape, ReadShapeValues("WindowPads", ctx.input(0)));
  LS_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(ctx.attrs()));
  const int n = static_cast<int>(w.extents.size()), rank = shape.size, first = rank - n;
  if (first < 0) {
    return InvalidArgument("WindowPads: shape " + IntsString(shape.span()) + " has no " + std::to_string(n) +
                           " spatial axes");
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kInt64, Shape{2 * rank}));
  int64_t* pads = out->mutable_data<int64_t>().data();
  std::fill_n(pads, 2 * rank, 0);
  for (int d = 0; d < n; ++d) {
    const int64_t in = shape[first + d];
    const AxisPads p =
        OnnxAxisPads(in, w.extents[d], w.strides[d], w.mode, AxisPads{w.pads[d], w.pads[n + d]}, w.ceil_mode);
    if (in + p.begin + p.end < w.extents[d]) {
      return InvalidArgument("WindowPads: a window of extent " + std::to_string(w.extents[d]) + " is larger than " +
                             "dimension " + std::to_string(first + d) + " of the image " + IntsString(shape.span()) +
                             " padded by " + std::to_string(p.begin) + " and " + std::to_string(p.end));
    }
    pads[first + d] = p.begin;
    pads[rank + first + d] = p.end;
  }
  return Status::Ok();
}

}  // namespace

void RegisterDeferredShapeOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("SplitSizes", 1, InferSplitSizes, SplitSizesKernel));
  (void)registry.Register(SimpleOpDef("WindowPads", 1, InferWindowPads, WindowPadsKernel));
}

}  // namespace lockstep
