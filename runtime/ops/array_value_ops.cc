// ArgMax and ArgMin, Gather (with its gradient, GatherGrad) and OneHot: the array ops
// that look at values (registered with the rest of the array family by RegisterArrayOps in
// array_ops.cc).
#include <cstdint>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/bfloat16.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"

namespace lockstep {
namespace {

// ---- ArgMax and ArgMin (attr "axis", default -1; "keep_dims", default false; int64 output) ----
//
// The first extreme wins, or the last with attr "select_last_index" (ONNX's). A NaN counts as
// more extreme than everything, in both (numpy's argmax and argmin return the first NaN).

template <bool kMax>
constexpr std::string_view ArgName() {
  return kMax ? "ArgMax" : "ArgMin";
}

struct ArgGeometry {
  Shape out;
  int axis = 0;
  bool last = false;  // select_last_index
};

template <bool kMax>
StatusOr<ArgGeometry> ArgShape(const AttrMap& attrs, const TensorSpec& in) {
  constexpr std::string_view op = ArgName<kMax>();
  if (in.dtype != DType::kFloat32 && in.dtype != DType::kFloat64 && in.dtype != DType::kBFloat16 &&
      in.dtype != DType::kInt32 && in.dtype != DType::kInt64) {
    return InvalidArgument(Str(op) + ": dtype " + Str(DTypeName(in.dtype)) +
                           " is not supported (float32, float64, bfloat16, int32, int64)");
  }
  if (in.shape.rank() < 1) {
    return InvalidArgument(Str(op) + ": input must have rank >= 1, got a scalar");
  }
  LS_ASSIGN_OR_RETURN(int64_t axis, attrs.GetIntOr("axis", -1));
  LS_ASSIGN_OR_RETURN(bool keep, attrs.GetBoolOr("keep_dims", false));
  ArgGeometry g;
  LS_ASSIGN_OR_RETURN(g.last, attrs.GetBoolOr("select_last_index", false));
  LS_ASSIGN_OR_RETURN(g.axis, NormalizeAxis(op, axis, in.shape.rank()));
  if (in.shape.dim(g.axis) == 0) {
    return InvalidArgument(Str(op) + ": axis " + std::to_string(axis) + " of shape " +
                           in.shape.ToString() + " is empty");
  }
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (d != g.axis) {
      g.out.AddDim(in.shape.dim(d));
    } else if (keep) {
      g.out.AddDim(1);
    }
  }
  return g;
}

template <bool kMax>
StatusOr<std::vector<TensorSpec>> InferArg(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(ArgName<kMax>(), ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(ArgGeometry g, ArgShape<kMax>(ctx.attrs, ctx.inputs[0]));
  return Single(DType::kInt64, g.out);
}

// The index of the extreme of len values `stride` apart.
template <bool kMax, typename T>
int64_t ArgStrided(const T* p, int64_t len, int64_t stride, bool last) {
  auto load = [&](int64_t a) {
    if constexpr (std::is_same_v<T, bfloat16>) {
      return Bfloat16ToFloat(p[a * stride]);
    } else {
      return p[a * stride];
    }
  };
  auto best = load(0);
  bool best_nan = best != best;
  if (best_nan && !last) return 0;
  int64_t best_index = 0;
  for (int64_t a = 1; a < len; ++a) {
    const auto v = load(a);
    if (v != v) {
      if (!last) return a;
      best_nan = true;
      best_index = a;
      continue;
    }
    if (best_nan) continue;
    const bool better = kMax ? (v > best || (last && v == best)) : (v < best || (last && v == best));
    if (better) {
      best = v;
      best_index = a;
    }
  }
  return best_index;
}

template <bool kMax, typename T>
void ArgTyped(KernelContext& ctx, const Tensor& in, const ArgGeometry& g, Tensor& out) {
  const Shape& s = in.shape();
  const int64_t len = s.dim(g.axis);
  int64_t inner = 1;
  for (int d = g.axis + 1; d < s.rank(); ++d) inner *= s.dim(d);
  const T* src = in.data<T>().data();
  int64_t* dst = out.mutable_data<int64_t>().data();
  auto outputs = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t o = i / inner, r = i % inner;
      dst[i] = ArgStrided<kMax>(src + o * len * inner + r, len, inner, g.last);
    }
  };
  ctx.pool().ParallelFor(out.num_elements(), std::max<int64_t>(1, kElementGrain / len), outputs);
}

template <bool kMax>
Status ArgKernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  LS_ASSIGN_OR_RETURN(ArgGeometry g, ArgShape<kMax>(ctx.attrs(), {in.dtype(), in.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, DType::kInt64, g.out));
  Tensor& out = *out_ptr;
  if (out.num_elements() == 0) return Status::Ok();
  switch (in.dtype()) {
    case DType::kFloat32: ArgTyped<kMax, float>(ctx, in, g, out); break;
    case DType::kFloat64: ArgTyped<kMax, double>(ctx, in, g, out); break;
    case DType::kBFloat16: ArgTyped<kMax, bfloat16>(ctx, in, g, out); break;
    case DType::kInt32: ArgTyped<kMax, int32_t>(ctx, in, g, out); break;
    case DType::kInt64: ArgTyped<kMax, int64_t>(ctx, in, g, out); break;
    default: return Internal(Str(ArgName<kMax>()) + ": unexpected dtype");
  }
  return Status::Ok();
}

// ---- Gather(params, indices int32/int64; attr "axis", default 0, a negative one counting from the end;
// attr "negative_indices": an index in [-size, 0) counts from the end, as ONNX's; default false,
// as TensorFlow's, where it is an error)
// -> [params[:axis]..., indices..., params[axis+1:]...] ----
//
// With negative_indices, an index i < 0 stands for i + params' size along the axis (ONNX's and numpy's rule); an index
// still outside [0, size) after that is an error. Params may be of any dtype.

struct GatherGeometry {
  Shape out;
  int axis = 0;
};

StatusOr<GatherGeometry> GatherShape(const TensorSpec& params, const TensorSpec& indices, int64_t axis) {
  if (indices.dtype != DType::kInt32 && indices.dtype != DType::kInt64) {
    return InvalidArgument("Gather: indices must be int32 or int64, got " +
                           Str(DTypeName(indices.dtype)));
  }
  if (params.shape.rank() < 1) {
    return InvalidArgument("Gather: params must have rank >= 1, got a scalar");
  }
  GatherGeometry g;
  LS_ASSIGN_OR_RETURN(g.axis, NormalizeAxis("Gather", axis, params.shape.rank()));
  if (indices.shape.rank() + params.shape.rank() - 1 > Shape::kMaxRank) {
    return InvalidArgument("Gather: result of indices " + indices.shape.ToString() +
                           " and params " + params.shape.ToString() +
                           " would exceed the maximum rank " + std::to_string(Shape::kMaxRank));
  }
  for (int d = 0; d < g.axis; ++d) g.out.AddDim(params.shape.dim(d));
  for (int64_t d : indices.shape.dims()) g.out.AddDim(d);
  for (int d = g.axis + 1; d < params.shape.rank(); ++d) g.out.AddDim(params.shape.dim(d));
  return g;
}

StatusOr<std::vector<TensorSpec>> InferGather(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Gather", ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs.GetIntOr("axis", 0));
  LS_ASSIGN_OR_RETURN(GatherGeometry g, GatherShape(ctx.inputs[0], ctx.inputs[1], axis));
  return Single(ctx.inputs[0].dtype, g.out);
}

// "[i,j]": where in `shape` flat element `flat` sits, for error messages.
std::string IndexString(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    index[d] = flat % shape.dim(d);
    flat /= shape.dim(d);
  }
  return IntsString(index);
}

// Checks every index against [0, bound), or [-bound, bound) with `negative` (counted from the
// end, as ONNX's Gather), before a kernel uses any of them. `what()` names the indexed thing,
// built only for the error (kernels allocate nothing on success).
template <typename I, typename WhatFn>
Status CheckIndices(std::string_view op, const Tensor& indices, int64_t bound, const WhatFn& what,
                    bool negative = false) {
  const int64_t low = negative ? -bound : 0;
  const std::span<const I> idx = indices.data<I>();
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < low || idx[i] >= bound) {
      return InvalidArgument(Str(op) + ": indices" + IndexString(indices.shape(), static_cast<int64_t>(i)) +
                             " = " + std::to_string(idx[i]) + " is out of range [" + std::to_string(low) + ", " +
                             std::to_string(bound) + ") for " + what());
    }
  }
  return Status::Ok();
}

// An index checked by CheckIndices(..., negative = true), counted from the start.
inline int64_t FromStart(int64_t index, int64_t bound) { return index < 0 ? index + bound : index; }

// Seen as params [outer, size, inner] and out [outer, count, inner]: each of the outer * count
// output rows of `inner` elements is one params row.
template <typename I>
Status GatherTyped(KernelContext& ctx, const Tensor& params, const Tensor& indices, int axis, Tensor& out) {
  const Shape& ps = params.shape();
  const int64_t size = ps.dim(axis);
  LS_ASSIGN_OR_RETURN(bool negative, ctx.attrs().GetBoolOr("negative_indices", false));
  LS_RETURN_IF_ERROR(CheckIndices<I>(
      "Gather", indices, size, [&] { return "params " + ps.ToString() + " along axis " + std::to_string(axis); },
      negative));
  if (out.num_elements() == 0) return Status::Ok();
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= ps.dim(d);
  const int64_t inner = params.num_elements() / outer / size;
  const std::span<const I> idx = indices.data<I>();
  const int64_t count = static_cast<int64_t>(idx.size());
  const bool strings = params.dtype() == DType::kString;
  const size_t row_bytes = static_cast<size_t>(inner) * DTypeSize(params.dtype());
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t o = i / count, k = i % count;
      const int64_t from = (o * size + FromStart(static_cast<int64_t>(idx[k]), size)) * inner;
      if (strings) {
        const std::string* src = params.data<std::string>().data() + from;
        std::copy(src, src + inner, out.mutable_data<std::string>().data() + i * inner);
      } else {
        std::memcpy(static_cast<char*>(out.mutable_raw_data()) + i * row_bytes,
                    static_cast<const char*>(params.raw_data()) + from * DTypeSize(params.dtype()), row_bytes);
      }
    }
  };
  ctx.pool().ParallelFor(outer * count, std::max<int64_t>(1, kElementGrain / inner), rows);
  return Status::Ok();
}

Status GatherKernel(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs().GetIntOr("axis", 0));
  LS_ASSIGN_OR_RETURN(GatherGeometry g, GatherShape({params.dtype(), params.shape()},
                                                    {indices.dtype(), indices.shape()}, axis));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, params.dtype(), g.out));
  Tensor& out = *out_ptr;
  if (indices.dtype() == DType::kInt32) return GatherTyped<int32_t>(ctx, params, indices, g.axis, out);
  return GatherTyped<int64_t>(ctx, params, indices, g.axis, out);
}

// ---- GatherGrad(dy, indices, params) -> params' shape: dy's rows summed into the rows they
// were gathered from (a row gathered twice gets both), in index order; Gather along axis 0
// only, negative indices counted from the end as Gather counts them ----

StatusOr<std::vector<TensorSpec>> InferGatherGrad(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("GatherGrad", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(CheckReal("GatherGrad", "dy", ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(GatherShape(ctx.inputs[2], ctx.inputs[1], 0).status());
  return Single(ctx.inputs[0].dtype, ctx.inputs[2].shape);
}

Status GatherGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& params = ctx.input(2);
  LS_ASSIGN_OR_RETURN(GatherGeometry gathered,
                      GatherShape({params.dtype(), params.shape()}, {indices.dtype(), indices.shape()}, 0));
  if (dy.shape() != gathered.out) {
    return InvalidArgument("GatherGrad: dy " + dy.shape().ToString() + " does not match the gathered shape " +
                           gathered.out.ToString());
  }
  const int64_t vocab = params.shape().dim(0);
  auto what = [&] { return "params " + params.shape().ToString(); };
  LS_RETURN_IF_ERROR(indices.dtype() == DType::kInt32
                         ? CheckIndices<int32_t>("GatherGrad", indices, vocab, what, /*negative=*/true)
                         : CheckIndices<int64_t>("GatherGrad", indices, vocab, what, /*negative=*/true));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), params.shape()));
  const int64_t row = vocab == 0 ? 0 : params.num_elements() / vocab;
  return DispatchReal(dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* po = out->mutable_data<T>().data();
    std::fill(po, po + out->num_elements(), T(0));
    const T* pd = dy.data<T>().data();
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      const int64_t v = FromStart(indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[static_cast<size_t>(i)]
                                                                   : indices.data<int64_t>()[static_cast<size_t>(i)],
                                  vocab);
      T* __restrict dst = po + v * row;
      const T* __restrict src = pd + i * row;
      for (int64_t k = 0; k < row; ++k) dst[k] += src[k];
    }
    return Status::Ok();
  });
}

Status GatherGradient(GradientBuilder& g) {
  LS_RETURN_IF_ERROR(CheckDifferentiable(g));
  LS_ASSIGN_OR_RETURN(int64_t axis, g.attrs().GetIntOr("axis", 0));
  if (axis != 0 && axis != -g.input_spec(0).shape.rank()) {
    return Unimplemented("the gradient of Gather along axis " + std::to_string(axis) + " (only axis 0 has one)");
  }
  if (g.needs_input_grad(0)) g.SetInputGrad(0, g.Op("GatherGrad", {g.output_grad(0), g.input(1), g.input(0)}));
  return Status::Ok();  // indices are integers: no gradient
}

// ---- OneHot(indices int32/int64; depth, dtype = float32) -> [indices..., depth] ----
//
// 1 at each index's position, 0 elsewhere. An index outside [0, depth) is an error (TensorFlow
// gives a row of zeros; a label out of range is a mistake here, not a convention).

StatusOr<std::vector<TensorSpec>> InferOneHot(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("OneHot", ctx.inputs.size(), 1, 1));
  const TensorSpec& indices = ctx.inputs[0];
  if (indices.dtype != DType::kInt32 && indices.dtype != DType::kInt64) {
    return InvalidArgument("OneHot: indices must be int32 or int64, got " + Str(DTypeName(indices.dtype)));
  }
  LS_ASSIGN_OR_RETURN(int64_t depth, ctx.attrs.GetInt("depth"));
  if (depth < 1) return InvalidArgument("OneHot: attr 'depth' must be >= 1, got " + std::to_string(depth));
  DType dtype = DType::kFloat32;
  if (ctx.attrs.Has("dtype")) {
    LS_ASSIGN_OR_RETURN(dtype, ctx.attrs.GetDType("dtype"));
  }
  LS_RETURN_IF_ERROR(CheckReal("OneHot", "attr 'dtype'", dtype));
  if (indices.shape.rank() >= Shape::kMaxRank) {
    return InvalidArgument("OneHot: indices " + indices.shape.ToString() + " already have the maximum rank");
  }
  Shape out = indices.shape;
  out.AddDim(depth);
  return Single(dtype, out);
}

Status OneHotKernel(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const std::array<TensorSpec, 1> spec{TensorSpec{indices.dtype(), indices.shape()}};
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> out_spec, InferOneHot({spec, ctx.attrs()}));
  const int64_t depth = out_spec[0].shape.dim(out_spec[0].shape.rank() - 1);
  auto what = [&] { return "depth " + std::to_string(depth); };
  LS_RETURN_IF_ERROR(indices.dtype() == DType::kInt32 ? CheckIndices<int32_t>("OneHot", indices, depth, what)
                                                      : CheckIndices<int64_t>("OneHot", indices, depth, what));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, out_spec[0].dtype, out_spec[0].shape));
  return DispatchReal(out->dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* po = out->mutable_data<T>().data();
    std::fill(po, po + out->num_elements(), T(0));
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      const int64_t v = indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[static_cast<size_t>(i)]
                                                         : indices.data<int64_t>()[static_cast<size_t>(i)];
      po[i * depth + v] = T(1);
    }
    return Status::Ok();
  });
}

OpDef MakeDef(std::string name, int num_inputs, ShapeFn infer, KernelFn compute) {
  OpDef def;
  def.name = std::move(name);
  def.min_inputs = def.max_inputs = num_inputs;
  def.infer = infer;
  def.compute = compute;
  return def;
}

}  // namespace

void RegisterArrayValueOps(OpRegistry& registry) {
  (void)registry.Register(MakeDef("ArgMax", 1, InferArg<true>, ArgKernel<true>));
  (void)registry.Register(MakeDef("ArgMin", 1, InferArg<false>, ArgKernel<false>));
  OpDef gather = MakeDef("Gather", 2, InferGather, GatherKernel);
  gather.gradient = GatherGradient;
  (void)registry.Register(std::move(gather));
  (void)registry.Register(MakeDef("GatherGrad", 3, InferGatherGrad, GatherGradKernel));
  (void)registry.Register(MakeDef("OneHot", 1, InferOneHot, OneHotKernel));
}

}  // namespace lockstep
