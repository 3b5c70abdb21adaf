// The translators of ONNX's array and shape ops: constants, casts, reshaping, slicing,
// gathering, padding and the shape computations of dynamic models.
#include <algorithm>

#include "runtime/import/constants.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {

Status Constant(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const onnx::TensorProto* value, ctx.TensorAttr("value"));
  if (value != nullptr) {
    StatusOr<Tensor> t = TensorFromOnnx(*value, nullptr);
    if (!t.ok()) return t.status().code() == StatusCode::kUnimplemented ? ctx.Unsupported(t.status().message())
                                                                          : ctx.Error(t.status().message());
    outputs->push_back(ctx.EmitConstant(std::move(*t)));
    return Status::Ok();
  }
  if (ctx.HasAttr("value_float")) {
    LS_ASSIGN_OR_RETURN(float v, ctx.FloatAttr("value_float", 0));
    outputs->push_back(ctx.EmitConstant(Tensor::Scalar<float>(v)));
    return Status::Ok();
  }
  if (ctx.HasAttr("value_int")) {
    LS_ASSIGN_OR_RETURN(int64_t v, ctx.IntAttr("value_int", 0));
    outputs->push_back(ctx.EmitConstant(Tensor::Scalar<int64_t>(v)));
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> ints, ctx.IntsAttr("value_ints"));
  if (ints) {
    outputs->push_back(ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(ints->size())}, *ints)));
    return Status::Ok();
  }
  for (const onnx::AttributeProto& a : ctx.node().attribute()) {
    if (a.name() == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      outputs->push_back(ctx.EmitConstant(Tensor::FromVector<float>(Shape{static_cast<int64_t>(v.size())}, v)));
      return Status::Ok();
    }
  }
  return ctx.Unsupported("only value, value_float(s) and value_int(s) constants are supported");
}

Status Cast(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  int64_t to = 0;
  if (ctx.opset() < 6) {
    // Opsets 1 to 5 name the type: "FLOAT", "INT64", ...
    LS_ASSIGN_OR_RETURN(std::string name, ctx.StringAttr("to", ""));
    onnx::TensorProto::DataType type;
    if (!onnx::TensorProto_DataType_Parse(name, &type)) return ctx.Error("'to' names no type: '" + name + "'");
    to = type;
  } else {
    LS_ASSIGN_OR_RETURN(to, ctx.IntAttr("to", 0));
  }
  StatusOr<DType> dtype = OnnxElemTypeToDType(static_cast<int32_t>(to));
  if (!dtype.ok()) return ctx.Unsupported("casting to " + OnnxElemTypeName(static_cast<int32_t>(to)));
  if (ComputeDType(*dtype) != *dtype) {
    // To half precision: rounded there, and computed with in float32 from then on.
    const std::string narrow = ctx.Emit("Cast", {ctx.input(0)}, AttrMap{{"dtype", *dtype}}, "narrow");
    outputs->push_back(ctx.Emit("Cast", {narrow}, AttrMap{{"dtype", ComputeDType(*dtype)}}));
    return Status::Ok();
  }
  outputs->push_back(ctx.Emit("Cast", {ctx.input(0)}, AttrMap{{"dtype", *dtype}}));
  return Status::Ok();
}

// CastLike(x, like): Cast to like's element type.
Status CastLike(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 1));
  outputs->push_back(ctx.Emit("Cast", {ctx.input(0)}, AttrMap{{"dtype", dtype}}));
  return Status::Ok();
}

Status Concat(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", ctx.opset() < 4 ? 1 : 0));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input(i));
  outputs->push_back(ctx.Emit("Concat", std::move(inputs), AttrMap{{"axis", axis}}));
  return Status::Ok();
}

// Reshape(data, shape): a constant target is an attribute (its zeros replaced by the input's
// dimensions where ONNX copies them and they are known); any other is read at run time.
Status Reshape(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t allowzero, ctx.IntAttr("allowzero", 0));
  // Before opset 5 the target is an attribute.
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> attr_shape, ctx.IntsAttr("shape"));
  if (ctx.opset() < 5 && !attr_shape) return ctx.Error("needs the shape attribute");
  if (ctx.opset() < 5 || ctx.ConstantInput(1) != nullptr) {
    std::vector<int64_t> shape;
    if (ctx.opset() < 5) {
      shape = *attr_shape;
    } else {
      LS_ASSIGN_OR_RETURN(shape, ctx.ConstantInts(1, "shape"));
    }
    bool resolved = true;
    for (size_t d = 0; d < shape.size() && allowzero == 0; ++d) {
      if (shape[d] != 0) continue;
      const auto& spec = ctx.InputSpec(0);
      if (spec && static_cast<int>(d) < spec->shape.rank() && spec->shape.dim(static_cast<int>(d)) >= 0) {
        shape[d] = spec->shape.dim(static_cast<int>(d));
      } else {
        resolved = false;
      }
    }
    if (resolved) {
      outputs->push_back(ctx.Emit("Reshape", {ctx.input(0)}, AttrMap{{"shape", std::move(shape)}}));
      return Status::Ok();
    }
    if (ctx.opset() < 5) {
      const std::string target = ctx.EmitConstant(
          Tensor::FromVector<int64_t>(lockstep::Shape{static_cast<int64_t>(shape.size())}, shape), "shape");
      outputs->push_back(ctx.Emit("Reshape", {ctx.input(0), target}));
      return Status::Ok();
    }
  }
  outputs->push_back(ctx.Emit("Reshape", {ctx.input(0), ctx.input(1)}, AttrMap{{"allowzero", allowzero != 0}}));
  return Status::Ok();
}

// Flatten(axis): [d0..d(a-1), da..] -> [product before, product after].
Status Flatten(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 1));
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (axis < -rank || axis > rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  if (axis == 1 && rank >= 1) {
    outputs->push_back(ctx.Emit("Flatten", {ctx.input(0)}));
    return Status::Ok();
  }
  const Shape& shape = ctx.InputSpec(0)->shape;
  int64_t before = 1, after = 1;
  for (int d = 0; d < rank; ++d) {
    int64_t& product = d < axis ? before : after;
    product = (product < 0 || shape.dim(d) < 0) ? -1 : product * shape.dim(d);
  }
  if (before < 0 && after < 0) {
    // Neither product is known before run time: Lockstep's Flatten multiplies both then.
    outputs->push_back(ctx.Emit("Flatten", {ctx.input(0)}, AttrMap{{"axis", axis}}));
    return Status::Ok();
  }
  outputs->push_back(ctx.Emit("Reshape", {ctx.input(0)}, AttrMap{{"shape", std::vector<int64_t>{before, after}}}));
  return Status::Ok();
}

// Unsqueeze(axes): one ExpandDims per new axis, in ascending order of the output's axes.
// Axes (of Unsqueeze and Squeeze) given as an input computed at run time.
bool RunTimeAxesInput(const OnnxNodeContext& ctx) {
  return ctx.opset() >= 13 && ctx.HasInput(1) && ctx.ConstantInput(1) == nullptr;
}

Status Unsqueeze(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (RunTimeAxesInput(ctx)) {
    outputs->push_back(ctx.Emit("Unsqueeze", {ctx.input(0), ctx.input(1)}));
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.AxesAttrOrInput("axes", 1));
  if (!axes || axes->empty()) return ctx.Error("needs axes");
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  const int64_t out_rank = rank + static_cast<int64_t>(axes->size());
  for (int64_t& a : *axes) {
    if (a < -out_rank || a >= out_rank) return ctx.Error("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += out_rank;
  }
  std::sort(axes->begin(), axes->end());
  if (std::adjacent_find(axes->begin(), axes->end()) != axes->end()) return ctx.Error("axes repeat");
  std::string x = ctx.input(0);
  for (size_t i = 0; i < axes->size(); ++i) {
    x = ctx.Emit("ExpandDims", {x}, AttrMap{{"axis", (*axes)[i]}}, i + 1 == axes->size() ? "" : "axis_" + std::to_string(i));
  }
  outputs->push_back(x);
  return Status::Ok();
}

Status Squeeze(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (RunTimeAxesInput(ctx)) {
    outputs->push_back(ctx.Emit("SqueezeAxes", {ctx.input(0), ctx.input(1)}));
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.AxesAttrOrInput("axes", 1));
  AttrMap attrs;
  if (axes) attrs.Set("axes", *axes);
  outputs->push_back(ctx.Emit("Squeeze", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

Status Transpose(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> perm, ctx.IntsAttr("perm"));
  AttrMap attrs;
  if (perm) attrs.Set("perm", *perm);
  outputs->push_back(ctx.Emit("Transpose", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

Status Tile(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.opset() < 6) return ctx.Unsupported("Tile before opset 6 (tiles and axis inputs)");
  outputs->push_back(ctx.Emit("Tile", {ctx.input(0), ctx.input(1)}));
  return Status::Ok();
}

// Size: the product of the shape, folded when the shape is known.
Status Size(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const std::string dims = ctx.Emit("Shape", {ctx.input(0)}, {}, "shape");
  outputs->push_back(ctx.Emit("Prod", {dims}, AttrMap{{"keep_dims", false}}));
  return Status::Ok();
}

// The dimensions that Gather picks out of a Shape (of every axis), when each of those is known
// though others are not: PyTorch's squeeze(d) becomes an If on "dimension d is 1", which then
// takes its branch while loading.
std::optional<Tensor> KnownDimsGathered(OnnxNodeContext& ctx) {
  const onnx::NodeProto* shape = ctx.sink().Producer(ctx.node().input(0));
  const Tensor* positions = ctx.ConstantInput(1);
  if (shape == nullptr || shape->op_type() != "Shape" || shape->attribute_size() > 0 || positions == nullptr) {
    return std::nullopt;
  }
  const std::optional<TensorSpec> spec = ctx.sink().TranslatedSpec(shape->input(0));
  StatusOr<Tensor> wide = CastTensor(*positions, DType::kInt64);
  if (!spec || !wide.ok()) return std::nullopt;
  const int64_t rank = spec->shape.rank();
  Tensor dims(DType::kInt64, wide->shape());
  for (int64_t i = 0; i < wide->num_elements(); ++i) {
    int64_t at = wide->data<int64_t>()[static_cast<size_t>(i)];
    if (at < 0) at += rank;
    if (at < 0 || at >= rank || spec->shape.dim(static_cast<int>(at)) < 0) return std::nullopt;
    dims.mutable_data<int64_t>()[static_cast<size_t>(i)] = spec->shape.dim(static_cast<int>(at));
  }
  return dims;
}

Status Gather(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  if (std::optional<Tensor> dims = axis == 0 ? KnownDimsGathered(ctx) : std::nullopt) {
    outputs->push_back(ctx.EmitConstant(std::move(*dims)));
    return Status::Ok();
  }
  // ONNX counts a negative index from the end.
  outputs->push_back(ctx.Emit("Gather", {ctx.input(0), ctx.input(1)}, AttrMap{{"axis", axis}, {"negative_indices", true}}));
  return Status::Ok();
}

// Shape(start, end): a constant when ONNX knows every dimension, else computed per request.
Status ShapeOp(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t start, ctx.IntAttr("start", 0));
  const bool has_end = ctx.HasAttr("end");
  LS_ASSIGN_OR_RETURN(int64_t end, ctx.IntAttr("end", 0));
  const auto& spec = ctx.InputSpec(0);
  if (spec && spec->shape.IsFullyDefined()) {
    const int64_t rank = spec->shape.rank();
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    const int64_t lo = clamp(start), hi = has_end ? clamp(end) : rank;
    std::vector<int64_t> dims;
    for (int64_t d = lo; d < hi; ++d) dims.push_back(spec->shape.dim(static_cast<int>(d)));
    outputs->push_back(ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(dims.size())}, dims)));
    return Status::Ok();
  }
  AttrMap attrs;
  if (start != 0) attrs.Set("start", start);
  if (has_end) attrs.Set("end", end);
  outputs->push_back(ctx.Emit("Shape", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

Status ConstantOfShape(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const onnx::TensorProto* value, ctx.TensorAttr("value"));
  Tensor fill = Tensor::Scalar<float>(0);
  if (value != nullptr) {
    StatusOr<Tensor> t = TensorFromOnnx(*value, nullptr);
    if (!t.ok()) return ctx.Unsupported("value: " + t.status().message());
    if (t->num_elements() != 1 || t->dtype() == DType::kString) return ctx.Error("value must be one number");
    fill = std::move(*t);
  }
  StatusOr<double> fill_value = ScalarValue(fill);
  if (!fill_value.ok()) return ctx.Error(fill_value.status().message());
  outputs->push_back(
      ctx.Emit("ConstantOfShape", {ctx.input(0)}, AttrMap{{"dtype", ComputeDType(fill.dtype())}, {"value", *fill_value}}));
  return Status::Ok();
}

// Slice: attributes before opset 10, inputs (constant or computed) from then on.
Status Slice(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  std::vector<std::string> inputs{ctx.input(0)};
  if (ctx.opset() < 10) {
    for (const char* name : {"starts", "ends", "axes"}) {
      LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, ctx.IntsAttr(name));
      if (!v) {
        if (std::string_view(name) == "axes") break;
        return ctx.Error(std::string("needs ") + name);
      }
      inputs.push_back(ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(v->size())}, *v), name));
    }
  } else {
    for (size_t i = 1; i < ctx.num_inputs(); ++i) {
      if (ctx.HasInput(i)) {
        inputs.push_back(ctx.input(i));
        continue;
      }
      if (i < 3) return ctx.Error("needs starts and ends");
      if (i == 4) break;  // omitted steps: all 1, the runtime's default
      // An omitted axes before given steps: 0, 1, ... as many as the starts.
      LS_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ctx.ConstantInts(1, "starts (when axes are omitted)"));
      std::vector<int64_t> axes(starts.size());
      for (size_t a = 0; a < axes.size(); ++a) axes[a] = static_cast<int64_t>(a);
      inputs.push_back(ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(axes.size())}, axes), "axes"));
    }
  }
  outputs->push_back(ctx.Emit("Slice", std::move(inputs)));
  return Status::Ok();
}

// Split: one Slice per output, along `axis`, of the sizes given (or equal parts).
std::vector<std::string> SplitByRunTimeSizes(OnnxNodeContext& ctx, const std::string& x, const std::string& sizes_value,
                                              int64_t axis, int64_t parts) {
  // Output k runs from the sum of the sizes before it to that sum and its own (CumSum of the
  // sizes gives the ends).
  std::vector<std::string> outputs;
  const std::string sizes = ctx.Emit("Cast", {sizes_value}, AttrMap{{"dtype", DType::kInt64}}, "sizes");
  const std::string ends = ctx.Emit("CumSum", {sizes, ctx.EmitConstant(Tensor::Scalar<int64_t>(0), "sum_axis")}, {}, "ends");
  const std::string starts = ctx.Emit("Sub", {ends, sizes}, {}, "starts");
  const std::string axes = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {axis}), "axes");
  for (int64_t k = 0; k < parts; ++k) {
    const std::string tag = "part_" + std::to_string(k);
    const std::string at = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {k}), tag + "/at");
    const std::string next = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {k + 1}), tag + "/next");
    const std::string b = ctx.Emit("Slice", {starts, at, next}, {}, tag + "/start");
    const std::string e = ctx.Emit("Slice", {ends, at, next}, {}, tag + "/end");
    outputs.push_back(ctx.Emit("Slice", {x, b, e, axes}, {}, tag));
  }
  return outputs;
}

std::vector<std::string> SplitBySizes(OnnxNodeContext& ctx, const std::string& x, int64_t axis,
                                      const std::vector<int64_t>& sizes) {
  std::vector<std::string> outputs;
  const std::string axes = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {axis}), "axes");
  int64_t begin = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int64_t end = begin + sizes[k];
    const std::string suffix = "part_" + std::to_string(k);
    const std::string starts = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {begin}), suffix + "/starts");
    const std::string ends = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {end}), suffix + "/ends");
    outputs.push_back(ctx.Emit("Slice", {x, starts, ends, axes}, {}, suffix));
    begin = end;
  }
  return outputs;
}

Status Split(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  const int64_t parts = ctx.node().output_size();
  if (RunTimeAxesInput(ctx)) {
    *outputs = SplitByRunTimeSizes(ctx, ctx.input(0), ctx.input(1), axis, parts);
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> sizes, ctx.AxesAttrOrInput("split", 1));
  if (!sizes) {
    // Equal parts; from opset 18 (num_outputs) the last may be smaller.
    LS_ASSIGN_OR_RETURN(int64_t num_outputs, ctx.IntAttr("num_outputs", parts));
    if (num_outputs != parts) {
      return ctx.Error("num_outputs " + std::to_string(num_outputs) + " differs from the node's " +
                       std::to_string(parts) + " outputs");
    }
    const bool uneven = ctx.opset() >= 18;
    LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
    if (axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    if (parts == 0) return ctx.Error("has no outputs");
    const int64_t dim = ctx.InputSpec(0)->shape.dim(static_cast<int>(axis));
    if (dim < 0) {
      // The sizes come from the dimension at run time, which SplitSizes checks.
      const std::string shape = ctx.Emit("Shape", {ctx.input(0)}, {}, "shape");
      const std::string run_time_sizes = ctx.Emit(
          "SplitSizes", {shape}, AttrMap{{"axis", axis}, {"parts", parts}, {"uneven", uneven}}, "equal_sizes");
      *outputs = SplitByRunTimeSizes(ctx, ctx.input(0), run_time_sizes, axis, parts);
      return Status::Ok();
    }
    const int64_t part = uneven ? (dim + parts - 1) / parts : dim / parts;
    const int64_t last = dim - part * (parts - 1);
    if ((!uneven && dim % parts != 0) || last < 0) {
      return ctx.Error("dimension " + std::to_string(dim) + " does not split into " + std::to_string(parts) + " parts");
    }
    sizes = std::vector<int64_t>(static_cast<size_t>(parts), part);
    sizes->back() = last;
  }
  if (static_cast<int64_t>(sizes->size()) != parts) return ctx.Error("split sizes and outputs differ in number");
  *outputs = SplitBySizes(ctx, ctx.input(0), axis, *sizes);
  return Status::Ok();
}

// Pad's pads for the axes its input 3 names (opset 18), as pads over every axis, the others'
// 0: the axes must be constant, the pads may be computed at run time.
StatusOr<std::string> PadsOverEveryAxis(OnnxNodeContext& ctx) {
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.ConstantInts(3, "axes"));
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  std::vector<int64_t> at(2 * axes.size());  // where each value of pads goes in the full pads
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank) return ctx.Error("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) return ctx.Error("axes repeat an axis");
    seen[static_cast<size_t>(a)] = true;
    at[i] = a;
    at[axes.size() + i] = rank + a;
  }
  const std::string zeros = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{2 * rank}, std::vector<int64_t>(2 * static_cast<size_t>(rank), 0)), "no_pads");
  const std::string where = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(at.size())}, at), "pads_at");
  const std::string given = ctx.Emit("Cast", {ctx.input(1)}, AttrMap{{"dtype", DType::kInt64}}, "given_pads");
  return ctx.Emit("ScatterElements", {zeros, where, given}, AttrMap{{"axis", int64_t{0}}}, "pads_all_axes");
}

// Pad's 'wrap' mode (opset 19): along each padded axis, the axis's last `begin` elements before
// it and its first `end` after it, as numpy's wrap pads by at most the axis's size. The pads
// must be constant, and the padded axes' sizes known and at least their pads.
Status PadWrap(OnnxNodeContext& ctx, const std::string& pads, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  const std::optional<std::vector<int64_t>> values = IntValues(ctx.sink().ConstantValue(pads));
  if (!values) return ctx.Unsupported("wrap padding by pads computed at run time");
  if (values->size() != 2 * static_cast<size_t>(rank)) return ctx.Error("pads do not fit the input's rank");
  std::string x = ctx.input(0);
  for (int d = 0; d < rank; ++d) {
    const int64_t begin = (*values)[static_cast<size_t>(d)], end = (*values)[static_cast<size_t>(rank + d)];
    if (begin == 0 && end == 0) continue;
    const int64_t size = ctx.InputSpec(0)->shape.dim(d);
    if (begin < 0 || end < 0) return ctx.Unsupported("negative pads in wrap mode");
    if (size < 0) return ctx.UnknownUntilRunTime("wrap padding of dimension " + std::to_string(d) + ", unknown until run time");
    if (begin > size || end > size) return ctx.Error("wrap pads larger than dimension " + std::to_string(d));
    const std::string tag = "axis_" + std::to_string(d);
    auto slice = [&](int64_t from, int64_t to, const char* what) {
      return ctx.Emit("Slice",
                      {x, ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {from}), tag + "/" + what + "_from"),
                       ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {to}), tag + "/" + what + "_to"),
                       ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{1}, {int64_t{d}}), tag + "/" + what + "_axis")},
                      {}, tag + "/" + what);
    };
    x = ctx.Emit("Concat", {slice(size - begin, size, "tail"), x, slice(0, end, "head")}, AttrMap{{"axis", int64_t{d}}},
                 tag);
  }
  outputs->push_back(ctx.Emit("Identity", {x}));
  return Status::Ok();
}

Status Pad(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::string mode, ctx.StringAttr("mode", "constant"));
  if (mode == "wrap" && ctx.opset() >= 19) {
    std::string pads = ctx.input(1);
    if (ctx.HasInput(3)) {
      LS_ASSIGN_OR_RETURN(pads, PadsOverEveryAxis(ctx));
    }
    return PadWrap(ctx, pads, outputs);
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge") return ctx.Unsupported("mode '" + mode + "'");
  AttrMap attrs{{"mode", mode}};
  std::string pads;
  if (ctx.opset() < 11) {
    LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> p, ctx.IntsAttr("pads"));
    if (!p) return ctx.Error("needs pads");
    pads = ctx.EmitConstant(Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(p->size())}, *p), "pads");
    LS_ASSIGN_OR_RETURN(float value, ctx.FloatAttr("value", 0));
    attrs.Set("value", static_cast<double>(value));
  } else {
    pads = ctx.input(1);
    if (ctx.HasInput(3)) {
      LS_ASSIGN_OR_RETURN(pads, PadsOverEveryAxis(ctx));
    }
    if (ctx.HasInput(2)) {
      const Tensor* value = ctx.ConstantInput(2);
      if (value == nullptr && mode == "constant") {
        // A value known only at run time: pad with zeros, and put the value where a padded mask
        // of ones says the padding lies.
        const std::string padded = ctx.Emit("Pad", {ctx.input(0), pads}, attrs, "zeros");
        const std::string ones = ctx.Emit(
            "Expand", {ctx.EmitConstant(Tensor::Scalar<float>(1.0f), "one"), ctx.Emit("Shape", {ctx.input(0)}, {}, "shape")},
            {}, "ones");
        const std::string image = ctx.Emit(
            "Cast", {ctx.Emit("Pad", {ones, pads}, attrs, "mask")}, AttrMap{{"dtype", DType::kBool}}, "image");
        const std::string fill = ctx.Emit("Reshape", {ctx.input(2)}, AttrMap{{"shape", std::vector<int64_t>{}}}, "value");
        outputs->push_back(ctx.Emit("Where", {image, padded, fill}));
        return Status::Ok();
      }
      // (reflect and edge take no value)
      if (value != nullptr) {
        if (value->num_elements() != 1) return ctx.Error("constant_value must be one value");
        StatusOr<double> pad_value = ScalarValue(*value);
        if (!pad_value.ok()) return ctx.Error(pad_value.status().message());
        attrs.Set("value", *pad_value);
      }
    }
  }
  outputs->push_back(ctx.Emit("Pad", {ctx.input(0), pads}, std::move(attrs)));
  return Status::Ok();
}

// The stopwords attribute becomes a constant input.
Status StringNormalizer(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  std::vector<std::string> stopwords;
  for (const onnx::AttributeProto& a : ctx.node().attribute()) {
    if (a.name() != "stopwords") continue;
    if (a.type() != onnx::AttributeProto::STRINGS) return ctx.Error("stopwords must be a list of strings");
    stopwords.assign(a.strings().begin(), a.strings().end());
  }
  LS_ASSIGN_OR_RETURN(std::string action, ctx.StringAttr("case_change_action", "NONE"));
  LS_ASSIGN_OR_RETURN(int64_t case_sensitive, ctx.IntAttr("is_case_sensitive", 0));
  const int64_t k = static_cast<int64_t>(stopwords.size());
  const std::string words = ctx.EmitConstant(Tensor::FromVector<std::string>(Shape{k}, std::move(stopwords)), "stopwords");
  outputs->push_back(ctx.Emit("StringNormalizer", {ctx.input(0), words},
                              AttrMap{{"case_change_action", action}, {"is_case_sensitive", case_sensitive != 0}}));
  return Status::Ok();
}

// TfIdfVectorizer: ONNX's attributes as they are, the weights as doubles. Pools of strings
// are refused: Lockstep's string tensors serve text preprocessing, not n-gram tables.
Status TfIdfVectorizer(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  AttrMap attrs;
  for (const onnx::AttributeProto& a : ctx.node().attribute()) {
    if (a.name() == "pool_strings") return ctx.Unsupported("n-grams of strings (pool_strings)");
    if (a.name() == "weights") {
      attrs.Set("weights", std::vector<double>(a.floats().begin(), a.floats().end()));
    } else if (a.type() == onnx::AttributeProto::INTS) {
      attrs.Set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    } else if (a.type() == onnx::AttributeProto::INT) {
      attrs.Set(a.name(), int64_t{a.i()});
    } else if (a.type() == onnx::AttributeProto::STRING) {
      attrs.Set(a.name(), a.s());
    } else {
      return ctx.Error("attribute '" + a.name() + "' has an unexpected type");
    }
  }
  outputs->push_back(ctx.Emit("TfIdfVectorizer", {ctx.input(0)}, std::move(attrs)));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
