// Identity, Reshape, Flatten, Concat (layout ops), and registration of the array family; Cast,
// ArgMax and Gather live in array_value_ops.cc.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

// ---- Identity ----

StatusOr<std::vector<TensorSpec>> InferIdentity(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Identity", ctx.inputs.size(), 1, 1));
  return std::vector<TensorSpec>{ctx.inputs[0]};
}

Status IdentityKernel(KernelContext& ctx) {
  ctx.SetOutput(0, ctx.input(0));
  return Status::Ok();
}

// ---- Reshape ----
//
// Reshape(x; attr "shape"): the target as a list of ints, at most one -1 (whatever makes the
// count fit); a 0 is a dimension of 0.
// Reshape(x, shape): the target as an int32/int64 vector computed at run time (ONNX's form,
// fed by Shape -> Gather -> Concat): a 0 copies x's dimension at that position unless attr
// "allowzero" is true, when it is a 0. Shape inference then knows only the rank.
// Both alias x.

// A view into `attrs`.
StatusOr<std::span<const int64_t>> ReadTargetShape(const AttrMap& attrs) {
  // A graph may carry the target as a Shape attr rather than a list; both mean the same.
  auto it = attrs.values().find("shape");
  if (it != attrs.values().end()) {
    if (const Shape* s = std::get_if<Shape>(&it->second)) return s->dims();
  }
  StatusOr<std::span<const int64_t>> dims = attrs.GetInts("shape");
  if (!dims.ok()) return dims.status().WithPrefix("Reshape");
  return dims;
}

StatusOr<Shape> ReshapeShape(const Shape& in, std::span<const int64_t> target) {
  auto target_string = [&] { return IntsString(target); };
  if (target.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return InvalidArgument("Reshape: target " + target_string() + " exceeds the maximum rank " +
                           std::to_string(Shape::kMaxRank));
  }
  int inferred = -1;
  int64_t known = 1;
  Shape out;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t d = target[i];
    out.AddDim(d);
    if (d == -1) {
      if (inferred >= 0) {
        return InvalidArgument("Reshape: target " + target_string() + " has more than one -1");
      }
      inferred = static_cast<int>(i);
    } else if (d < 0) {
      return InvalidArgument("Reshape: target " + target_string() + " has a negative dimension");
    } else if (__builtin_mul_overflow(known, d, &known)) {
      return InvalidArgument("Reshape: target " + target_string() + " is too large");
    }
  }
  const int64_t n = in.num_elements();
  if (n < 0) return out;  // unknown input: a -1 stays unknown, known dims are checked at run time
  if (inferred >= 0) {
    if (known == 0 || n % known != 0) {
      return InvalidArgument("Reshape: cannot reshape " + in.ToString() + " (" + std::to_string(n) +
                             " elements) into " + target_string());
    }
    out.set_dim(inferred, n / known);
  } else if (known != n) {
    return InvalidArgument("Reshape: cannot reshape " + in.ToString() + " (" + std::to_string(n) +
                           " elements) into " + target_string() + " (" + std::to_string(known) +
                           " elements)");
  }
  return out;
}

// The target given as a shape input, its 0s resolved: checked like every shape from outside,
// so that a hostile shape tensor is an error before anything looks at its product.
StatusOr<Shape> TargetFromInput(const AttrMap& attrs, const Shape& in, const Tensor& shape) {
  LS_ASSIGN_OR_RETURN(bool allow_zero, attrs.GetBoolOr("allowzero", false));
  LS_ASSIGN_OR_RETURN(IntList target, ReadIntList("Reshape", "the shape input", shape, Shape::kMaxRank));
  for (int i = 0; i < target.size && !allow_zero; ++i) {
    if (target[i] != 0) continue;
    if (i >= in.rank()) {
      return InvalidArgument("Reshape: target " + IntsString(target.span()) + " has a 0 at position " +
                             std::to_string(i) + ", where " + in.ToString() + " has no dimension to copy");
    }
    target.values[static_cast<size_t>(i)] = in.dim(i);
  }
  StatusOr<Shape> checked = Shape::FromDims(target.span());
  if (!checked.ok()) {
    return InvalidArgument("Reshape: target " + IntsString(target.span()) + ": " + checked.status().message());
  }
  return *checked;
}

StatusOr<std::vector<TensorSpec>> InferReshape(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Reshape", ctx.inputs.size(), 1, 2));
  if (ctx.inputs.size() == 2) {
    LS_RETURN_IF_ERROR(ctx.attrs.GetBoolOr("allowzero", false).status());
    LS_ASSIGN_OR_RETURN(int64_t rank, IntVectorLength("Reshape", "the shape input", ctx.inputs[1]));
    if (rank < 0) return InvalidArgument("Reshape: the length of the shape input must be known before run time");
    if (rank > Shape::kMaxRank) {
      return InvalidArgument("Reshape: a target of " + std::to_string(rank) + " dimensions exceeds the maximum rank " +
                             std::to_string(Shape::kMaxRank));
    }
    Shape out;
    for (int64_t d = 0; d < rank; ++d) out.AddDim(-1);
    return Single(ctx.inputs[0].dtype, out);
  }
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> target, ReadTargetShape(ctx.attrs));
  LS_ASSIGN_OR_RETURN(Shape out, ReshapeShape(ctx.inputs[0].shape, target));
  return Single(ctx.inputs[0].dtype, out);
}

Status ReshapeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape out;
  if (ctx.num_inputs() == 2) {
    LS_ASSIGN_OR_RETURN(Shape target, TargetFromInput(ctx.attrs(), x.shape(), ctx.input(1)));
    LS_ASSIGN_OR_RETURN(out, ReshapeShape(x.shape(), target.dims()));
  } else {
    LS_ASSIGN_OR_RETURN(std::span<const int64_t> target, ReadTargetShape(ctx.attrs()));
    LS_ASSIGN_OR_RETURN(out, ReshapeShape(x.shape(), target));
  }
  ctx.SetOutput(0, x.Reshaped(out));
  return Status::Ok();
}

// ---- Flatten(x; attr "axis", default 1): [d0 .. d(a-1), da ..] -> [product before a, product
// from a on] ----
//
// ONNX's Flatten at any axis, so that an importer need not know the dimensions it multiplies:
// either product is -1 in inference when a dimension in it is unknown, and exact at run time.

StatusOr<Shape> FlattenShape(const Shape& in, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, attrs.GetIntOr("axis", 1));
  if (axis < 0) axis += in.rank();
  if (axis < 0 || axis > in.rank()) {
    return InvalidArgument("Flatten: axis " + std::to_string(axis) + " is out of range for " + in.ToString());
  }
  int64_t before = 1, after = 1;
  for (int d = 0; d < in.rank(); ++d) {
    int64_t& product = d < axis ? before : after;
    product = (product < 0 || in.dim(d) < 0) ? -1 : product * in.dim(d);
  }
  return Shape{before, after};
}

StatusOr<std::vector<TensorSpec>> InferFlatten(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Flatten", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(Shape out, FlattenShape(ctx.inputs[0].shape, ctx.attrs));
  return Single(ctx.inputs[0].dtype, out);
}

Status FlattenKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(Shape out, FlattenShape(ctx.input(0).shape(), ctx.attrs()));
  ctx.SetOutput(0, ctx.input(0).Reshaped(out));
  return Status::Ok();
}

// ---- Squeeze (attr "axes": dimensions of size 1 to drop; absent or empty: every one) ----
// ---- ExpandDims (attr "axis": where the new dimension of size 1 goes, in [-rank-1, rank]) ----
// Both are TensorFlow's, for imported graphs; like Reshape they alias their input.

// Squeeze's output shape from its axes (empty: every dimension of size 1).
StatusOr<Shape> SqueezeAxesShape(const Shape& in, std::span<const int64_t> axes) {
  bool drop[Shape::kMaxRank] = {};
  for (int64_t axis : axes) {
    LS_ASSIGN_OR_RETURN(int a, NormalizeAxis("Squeeze", axis, in.rank()));
    if (in.dim(a) != 1 && in.dim(a) != -1) {
      return InvalidArgument("Squeeze: dimension " + std::to_string(a) + " of " + in.ToString() + " is not 1");
    }
    drop[a] = true;
  }
  Shape out;
  for (int d = 0; d < in.rank(); ++d) {
    // With no axes named, every dimension of size 1 goes, as in TensorFlow: at run time all that
    // are 1; in inference only those known to be 1 (an unknown one may not be), so a batch of
    // one squeezes further than inference says, and the kernels after it check what they get.
    const bool dropped = axes.empty() ? in.dim(d) == 1 : drop[d];
    if (!dropped) out.AddDim(in.dim(d));
  }
  return out;
}

StatusOr<Shape> SqueezeShape(const Shape& in, const AttrMap& attrs) {
  std::span<const int64_t> axes;
  if (attrs.Has("axes")) {
    LS_ASSIGN_OR_RETURN(axes, attrs.GetInts("axes"));
  }
  return SqueezeAxesShape(in, axes);
}

// ---- SqueezeAxes(x, axes) and Unsqueeze(x, axes): Squeeze and ONNX's Unsqueeze with their
// axes an int vector input, read at run time (shape inference knows the rank from its length).
// Unsqueeze puts a 1 at each of the axes, which count in the output's rank. Both alias x. ----

StatusOr<Shape> UnsqueezeShape(const Shape& in, std::span<const int64_t> axes) {
  const int64_t out_rank = in.rank() + static_cast<int64_t>(axes.size());
  if (out_rank > Shape::kMaxRank) {
    return InvalidArgument("Unsqueeze: " + in.ToString() + " and " + std::to_string(axes.size()) +
                           " new axes exceed the maximum rank");
  }
  bool one[Shape::kMaxRank] = {};
  for (int64_t axis : axes) {
    LS_ASSIGN_OR_RETURN(int a, NormalizeAxis("Unsqueeze", axis, static_cast<int>(out_rank)));
    if (one[a]) return InvalidArgument("Unsqueeze: axes " + IntsString(axes) + " repeat an axis");
    one[a] = true;
  }
  Shape out;
  int next = 0;
  for (int d = 0; d < out_rank; ++d) out.AddDim(one[d] ? 1 : in.dim(next++));
  return out;
}

template <bool kUnsqueeze>
StatusOr<std::vector<TensorSpec>> InferAxesInput(const ShapeInferenceContext& ctx) {
  const char* op = kUnsqueeze ? "Unsqueeze" : "SqueezeAxes";
  LS_RETURN_IF_ERROR(CheckInputCount(op, ctx.inputs.size(), 2, 2));
  const Shape& in = ctx.inputs[0].shape;
  if (const Tensor* axes = ctx.value(1)) {
    LS_ASSIGN_OR_RETURN(IntList list, ReadIntList(op, "axes", *axes, Shape::kMaxRank));
    LS_ASSIGN_OR_RETURN(Shape out, kUnsqueeze ? UnsqueezeShape(in, list.span()) : SqueezeAxesShape(in, list.span()));
    return Single(ctx.inputs[0].dtype, out);
  }
  LS_ASSIGN_OR_RETURN(int64_t n, IntVectorLength(op, "axes", ctx.inputs[1]));
  const int64_t rank = kUnsqueeze ? in.rank() + n : in.rank() - n;
  if (n < 0 || (!kUnsqueeze && n == 0) || rank < 0 || rank > Shape::kMaxRank) {
    return InvalidArgument(Str(op) + ": the number of axes must be known before run time (and fit the rank)");
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) out.AddDim(-1);
  return Single(ctx.inputs[0].dtype, out);
}

template <bool kUnsqueeze>
Status AxesInputKernel(KernelContext& ctx) {
  const char* op = kUnsqueeze ? "Unsqueeze" : "SqueezeAxes";
  LS_ASSIGN_OR_RETURN(IntList axes, ReadIntList(op, "axes", ctx.input(1), Shape::kMaxRank));
  const Shape& in = ctx.input(0).shape();
  LS_ASSIGN_OR_RETURN(Shape out, kUnsqueeze ? UnsqueezeShape(in, axes.span()) : SqueezeAxesShape(in, axes.span()));
  if (!kUnsqueeze && axes.size == 0) return InvalidArgument("SqueezeAxes: no axes given");
  ctx.SetOutput(0, ctx.input(0).Reshaped(out));
  return Status::Ok();
}

StatusOr<Shape> ExpandDimsShape(const Shape& in, const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, attrs.GetInt("axis"));
  if (in.rank() >= Shape::kMaxRank) {
    return InvalidArgument("ExpandDims: " + in.ToString() + " is at the maximum rank already");
  }
  LS_ASSIGN_OR_RETURN(int a, NormalizeAxis("ExpandDims", axis, in.rank() + 1));
  Shape out;
  for (int d = 0; d <= in.rank(); ++d) {
    if (d == a) out.AddDim(1);
    if (d < in.rank()) out.AddDim(in.dim(d));
  }
  return out;
}

template <StatusOr<Shape> (*kShapeOf)(const Shape&, const AttrMap&)>
StatusOr<std::vector<TensorSpec>> InferReshaping(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Squeeze/ExpandDims", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(Shape out, kShapeOf(ctx.inputs[0].shape, ctx.attrs));
  return Single(ctx.inputs[0].dtype, out);
}

template <StatusOr<Shape> (*kShapeOf)(const Shape&, const AttrMap&)>
Status ReshapingKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(Shape out, kShapeOf(ctx.input(0).shape(), ctx.attrs()));
  ctx.SetOutput(0, ctx.input(0).Reshaped(out));
  return Status::Ok();
}

// ---- Concat (attr "axis", required; negative counts from the end) ----

// `spec(i)` gives input i's TensorSpec; shared by inference (specs) and the kernel (tensors).
template <typename SpecFn>
StatusOr<Shape> ConcatShape(const AttrMap& attrs, int count, const SpecFn& spec, int* axis_out) {
  if (count < 1) return InvalidArgument("Concat: needs at least one input");
  LS_ASSIGN_OR_RETURN(int64_t axis, attrs.GetInt("axis"));
  const TensorSpec first = spec(0);
  if (first.shape.rank() == 0) return InvalidArgument("Concat: cannot concatenate scalars");
  LS_ASSIGN_OR_RETURN(int a, NormalizeAxis("Concat", axis, first.shape.rank()));
  Shape out = first.shape;
  for (int i = 1; i < count; ++i) {
    const TensorSpec s = spec(i);
    if (s.dtype != first.dtype) {
      return InvalidArgument("Concat: input " + std::to_string(i) + " is " +
                             Str(DTypeName(s.dtype)) + " but input 0 is " +
                             Str(DTypeName(first.dtype)));
    }
    bool fits = s.shape.rank() == first.shape.rank();
    for (int d = 0; fits && d < out.rank(); ++d) {
      int64_t merged;
      if (d == a) {
        merged = out.dim(d) < 0 || s.shape.dim(d) < 0 ? -1 : out.dim(d) + s.shape.dim(d);
      } else {
        fits = MergeDim(out.dim(d), s.shape.dim(d), &merged);
      }
      out.set_dim(d, merged);
    }
    if (!fits) {
      return InvalidArgument("Concat: input " + std::to_string(i) + " shape " + s.shape.ToString() +
                             " does not match input 0 shape " + first.shape.ToString() +
                             " outside axis " + std::to_string(a));
    }
  }
  *axis_out = a;
  return out;
}

StatusOr<std::vector<TensorSpec>> InferConcat(const ShapeInferenceContext& ctx) {
  int axis = 0;
  LS_ASSIGN_OR_RETURN(Shape out, ConcatShape(
                                     ctx.attrs, static_cast<int>(ctx.inputs.size()),
                                     [&](int i) { return ctx.inputs[i]; }, &axis));
  return Single(ctx.inputs[0].dtype, out);
}

Status ConcatKernel(KernelContext& ctx) {
  int axis = 0;
  LS_ASSIGN_OR_RETURN(Shape shape,
                      ConcatShape(
                          ctx.attrs(), ctx.num_inputs(),
                          [&](int i) {
                            return TensorSpec{ctx.input(i).dtype(), ctx.input(i).shape()};
                          },
                          &axis));
  const DType dtype = ctx.input(0).dtype();
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, dtype, shape));
  Tensor& out = *out_ptr;
  if (out.num_elements() == 0) return Status::Ok();
  // Seen as [outer, row]: each output row is the inputs' rows of `chunk` elements side by side.
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= shape.dim(d);
  const int64_t row = out.num_elements() / outer;
  const size_t elem = DTypeSize(dtype);
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      int64_t offset = o * row;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const Tensor& in = ctx.input(i);
        const int64_t chunk = in.num_elements() / outer;
        if (chunk == 0) continue;
        if (dtype == DType::kString) {
          const std::string* src = in.data<std::string>().data() + o * chunk;
          std::copy(src, src + chunk, out.mutable_data<std::string>().data() + offset);
        } else {
          std::memcpy(static_cast<char*>(out.mutable_raw_data()) + offset * elem,
                      static_cast<const char*>(in.raw_data()) + o * chunk * elem, chunk * elem);
        }
        offset += chunk;
      }
    }
  };
  ctx.pool().ParallelFor(outer, std::max<int64_t>(1, kElementGrain / row), rows);
  return Status::Ok();
}

OpDef MakeDef(std::string name, int min_inputs, int max_inputs, ShapeFn infer, KernelFn compute,
              bool aliases_input) {
  OpDef def;
  def.name = std::move(name);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.infer = infer;
  def.compute = compute;
  def.aliases_input = aliases_input;
  return def;
}

}  // namespace

void RegisterArrayValueOps(OpRegistry& registry);  // array_value_ops.cc

namespace {

Status IdentityGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  g.SetInputGrad(0, g.output_grad(0));
  return Status::Ok();
}

// Reshape and Flatten: the gradient takes the input's shape back. A shape with more than one
// dimension unknown until run time cannot be written as a Reshape target; a Reshape given its
// target as an input takes the input's shape back as one (Shape, exact with allowzero).
Status ReshapeGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  if (g.num_inputs() == 2) {
    g.SetInputGrad(0, g.Op("Reshape", {g.output_grad(0), g.Op("Shape", {g.input(0)})}, AttrMap{{"allowzero", true}}));
    return Status::Ok();
  }
  const Shape& in = g.input_spec(0).shape;
  int unknown = 0;
  for (int64_t d : in.dims()) unknown += d < 0 ? 1 : 0;
  if (unknown > 1) {
    return Unimplemented("the gradient of a reshape from " + in.ToString() +
                         " (more than one dimension unknown before run time)");
  }
  AttrMap attrs;
  attrs.Set("shape", std::vector<int64_t>(in.dims().begin(), in.dims().end()));
  g.SetInputGrad(0, g.Op("Reshape", {g.output_grad(0)}, std::move(attrs)));
  return Status::Ok();
}

// Each input's part of dy, a Slice along the axis: the sizes along it must be known before run
// time (a layer's channels), so that the slices' bounds are constants.
Status ConcatGrad(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  const Shape& out = g.output_spec(0).shape;
  LS_ASSIGN_OR_RETURN(int64_t axis_attr, g.attrs().GetInt("axis"));
  LS_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Concat", axis_attr, out.rank()));
  const std::string axes = g.Constant(Tensor::FromVector<int64_t>({1}, {axis}));
  int64_t offset = 0;
  for (int i = 0; i < g.num_inputs(); ++i) {
    const int64_t size = g.input_spec(i).shape.dim(axis);
    if (size < 0) {
      return Unimplemented("the gradient of a Concat whose input " + std::to_string(i) + " " +
                           g.input_spec(i).shape.ToString() + " has an unknown size along axis " +
                           std::to_string(axis));
    }
    if (g.needs_input_grad(i)) {
      const std::string starts = g.Constant(Tensor::FromVector<int64_t>({1}, {offset}));
      const std::string ends = g.Constant(Tensor::FromVector<int64_t>({1}, {offset + size}));
      g.SetInputGrad(i, g.Op("Slice", {g.output_grad(0), starts, ends, axes}));
    }
    offset += size;
  }
  return Status::Ok();
}

}  // namespace

void RegisterArrayOps(OpRegistry& registry) {
  OpDef identity = MakeDef("Identity", 1, 1, InferIdentity, IdentityKernel, true);
  identity.gradient = IdentityGrad;
  (void)registry.Register(std::move(identity));
  OpDef reshape = MakeDef("Reshape", 1, 2, InferReshape, ReshapeKernel, true);
  reshape.gradient = ReshapeGrad;
  (void)registry.Register(std::move(reshape));
  OpDef flatten = MakeDef("Flatten", 1, 1, InferFlatten, FlattenKernel, true);
  flatten.gradient = ReshapeGrad;
  (void)registry.Register(std::move(flatten));
  OpDef squeeze = MakeDef("Squeeze", 1, 1, InferReshaping<SqueezeShape>, ReshapingKernel<SqueezeShape>, true);
  squeeze.gradient = ReshapeGrad;
  (void)registry.Register(std::move(squeeze));
  OpDef expand = MakeDef("ExpandDims", 1, 1, InferReshaping<ExpandDimsShape>, ReshapingKernel<ExpandDimsShape>, true);
  expand.gradient = ReshapeGrad;
  (void)registry.Register(std::move(expand));
  (void)registry.Register(MakeDef("Unsqueeze", 2, 2, InferAxesInput<true>, AxesInputKernel<true>, true));
  (void)registry.Register(MakeDef("SqueezeAxes", 2, 2, InferAxesInput<false>, AxesInputKernel<false>, true));
  OpDef concat = MakeDef("Concat", 1, -1, InferConcat, ConcatKernel, false);
  concat.gradient = ConcatGrad;
  (void)registry.Register(std::move(concat));
  RegisterArrayValueOps(registry);
}

}  // namespace lockstep
