// Each Lockstep op's ONNX translation (opset 17), for onnx_export.cc. A translation accepts the
// attrs it knows and refuses any other, so an attr it would drop is an error, never a
// different answer.
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>

#include "runtime/onnx/onnx_export_context.h"
#include "runtime/onnx/onnx_tensor.h"

namespace lockstep::onnx_export {
namespace {

using onnx::NodeProto;

Status OnlyAttrs(const ExportNode& n, std::initializer_list<std::string_view> known) {
  for (const auto& [name, value] : n.def.attrs.values()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Unimplemented("attr '" + name + "' has no ONNX translation");
    }
  }
  return Status::Ok();
}

std::vector<int64_t> Ints(std::span<const int64_t> values) { return {values.begin(), values.end()}; }

// A spatial attr as [h, w]: two numbers, or four in NHWC order ([1, h, w, 1]).
StatusOr<std::array<int64_t, 2>> SpatialPair(const AttrMap& attrs, std::string_view name,
                                             std::array<int64_t, 2> fallback) {
  if (!attrs.Has(name)) return fallback;
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> v, attrs.GetInts(name));
  if (v.size() == 2) return std::array<int64_t, 2>{v[0], v[1]};
  if (v.size() == 4) return std::array<int64_t, 2>{v[1], v[2]};
  return InvalidArgument("attr '" + std::string(name) + "' must hold 2 or 4 numbers");
}

// ONNX's pads [top, left, bottom, right] for a window of `extent` (taps spread by dilation
// included) on the node's NHWC input; empty when padding is SAME and the input's size is
// unknown (the caller writes auto_pad SAME_UPPER, which is TensorFlow's SAME).
StatusOr<std::vector<int64_t>> Pads(const ExportNode& n, std::array<int64_t, 2> extent, std::array<int64_t, 2> strides) {
  LS_ASSIGN_OR_RETURN(std::string padding, n.def.attrs.GetStringOr("padding", "VALID"));
  std::transform(padding.begin(), padding.end(), padding.begin(), [](unsigned char c) { return std::toupper(c); });
  if (padding == "VALID") return std::vector<int64_t>{0, 0, 0, 0};
  if (padding == "EXPLICIT") {
    LS_ASSIGN_OR_RETURN(std::span<const int64_t> p, n.def.attrs.GetInts("explicit_paddings"));
    if (p.size() != 8) return InvalidArgument("attr 'explicit_paddings' must hold 8 numbers");
    return std::vector<int64_t>{p[2], p[4], p[3], p[5]};
  }
  if (padding != "SAME") return InvalidArgument("attr 'padding' is " + padding);
  const Shape& in = n.input_specs[0].shape;
  if (in.rank() != 4) return InvalidArgument("the input must have rank 4 (NHWC)");
  if (in.dim(1) < 0 || in.dim(2) < 0) return std::vector<int64_t>{};
  std::vector<int64_t> pads(4);
  for (int axis = 0; axis < 2; ++axis) {
    const int64_t size = in.dim(1 + axis), s = strides[axis];
    const int64_t out = (size + s - 1) / s;
    const int64_t total = std::max<int64_t>((out - 1) * s + extent[axis] - size, 0);
    pads[axis] = total / 2;
    pads[axis + 2] = total - total / 2;
  }
  return pads;
}

void SetPads(NodeProto& node, const std::vector<int64_t>& pads) {
  if (pads.empty()) {
    SetString(node, "auto_pad", "SAME_UPPER");
  } else {
    SetInts(node, "pads", pads);
  }
}

std::string Transposed(ExportContext& ctx, const std::string& x, std::vector<int64_t> perm, const std::string& base) {
  return ctx.Temp("Transpose", {x}, base, [perm](NodeProto& n) { SetInts(n, "perm", perm); });
}

std::string ToNchw(ExportContext& ctx, const std::string& x) { return Transposed(ctx, x, {0, 3, 1, 2}, x + "/nchw"); }

void FromNchw(ExportContext& ctx, const std::string& y, const std::string& out) {
  ctx.Node("Transpose", {y}, out, [](NodeProto& n) { SetInts(n, "perm", std::vector<int64_t>{0, 2, 3, 1}); });
}

// The inputs a product multiplies: each rounded to bfloat16 when the product runs in bf16
// (attr precision bfloat16, or an operand that is bf16 already), as Lockstep's core rounds them.
StatusOr<std::vector<std::string>> ProductInputs(ExportContext& ctx, const ExportNode& n) {
  LS_ASSIGN_OR_RETURN(std::string precision, n.def.attrs.GetStringOr("precision", "float32"));
  if (precision != "float32" && precision != "bfloat16") return InvalidArgument("attr 'precision' is " + precision);
  bool bf16 = precision == "bfloat16";
  for (const TensorSpec& spec : n.input_specs) bf16 = bf16 || spec.dtype == DType::kBFloat16;
  if (!bf16) return n.inputs;
  std::vector<std::string> rounded;
  for (size_t i = 0; i < n.inputs.size(); ++i) rounded.push_back(ctx.RoundedToBf16(n.inputs[i], n.input_specs[i].dtype));
  return rounded;
}

// The filter's [KH, KW] from its HWIO shape.
StatusOr<std::array<int64_t, 2>> FilterSize(const ExportNode& n) {
  const Shape& f = n.input_specs[1].shape;
  if (f.rank() != 4 || f.dim(0) < 0 || f.dim(1) < 0 || f.dim(2) < 0 || f.dim(3) < 0) {
    return InvalidArgument("the filter's shape must be known, [KH, KW, C, M], got " + f.ToString());
  }
  return std::array<int64_t, 2>{f.dim(0), f.dim(1)};
}

// A convolution on NHWC made ONNX's: the input to NCHW, `weight` (OIHW) and `group` given,
// the output back to NHWC.
Status Convolution(ExportContext& ctx, const ExportNode& n, const std::string& x, const std::string& weight,
                   int64_t group) {
  LS_ASSIGN_OR_RETURN(auto kernel, FilterSize(n));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(n.def.attrs, "strides", {1, 1}));
  LS_ASSIGN_OR_RETURN(auto dilations, SpatialPair(n.def.attrs, "dilations", {1, 1}));
  const std::array<int64_t, 2> extent{(kernel[0] - 1) * dilations[0] + 1, (kernel[1] - 1) * dilations[1] + 1};
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, Pads(n, extent, strides));
  const std::string y = ctx.Temp("Conv", {ToNchw(ctx, x), weight}, n.outputs[0] + "/nchw", [&](NodeProto& c) {
    SetInts(c, "kernel_shape", kernel);
    SetInts(c, "strides", strides);
    SetInts(c, "dilations", dilations);
    SetInt(c, "group", group);
    SetPads(c, pads);
  });
  FromNchw(ctx, y, n.outputs[0]);
  return Status::Ok();
}

Status Conv2D(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"strides", "dilations", "padding", "explicit_paddings", "precision", "groups"}));
  LS_ASSIGN_OR_RETURN(const int64_t groups, n.def.attrs.GetIntOr("groups", 1));
  LS_ASSIGN_OR_RETURN(std::vector<std::string> in, ProductInputs(ctx, n));
  // HWIO to OIHW; with groups, I is the channels of one group on both sides.
  return Convolution(ctx, n, in[0], Transposed(ctx, in[1], {3, 2, 0, 1}, n.inputs[1] + "/oihw"), groups);
}

Status DepthwiseConv2D(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"strides", "dilations", "padding", "explicit_paddings"}));
  LS_RETURN_IF_ERROR(FilterSize(n).status());
  const Shape& f = n.input_specs[1].shape;  // [KH, KW, C, M]: channel c's m-th filter makes channel c * M + m
  const std::string cm = Transposed(ctx, n.inputs[1], {2, 3, 0, 1}, n.inputs[1] + "/cmhw");
  const std::string weight = ctx.Temp(
      "Reshape", {cm, ctx.Int64s(n.inputs[1] + "/oihw_shape", {f.dim(2) * f.dim(3), 1, f.dim(0), f.dim(1)})},
      n.inputs[1] + "/oihw");
  return Convolution(ctx, n, n.inputs[0], weight, f.dim(2));
}

template <bool kMax>
Status Pool(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"ksize", "strides", "padding", "dilations"}));
  if (!n.def.attrs.Has("ksize")) return InvalidArgument("attr 'ksize' is missing");
  LS_ASSIGN_OR_RETURN(auto kernel, SpatialPair(n.def.attrs, "ksize", {1, 1}));
  LS_ASSIGN_OR_RETURN(auto strides, SpatialPair(n.def.attrs, "strides", kernel));
  LS_ASSIGN_OR_RETURN(auto dilations, SpatialPair(n.def.attrs, "dilations", {1, 1}));
  if (!kMax && (dilations[0] != 1 || dilations[1] != 1)) {
    return Unimplemented("a dilated average pool has no opset 17 translation (AveragePool takes dilations from opset 19)");
  }
  const std::array<int64_t, 2> extent{(kernel[0] - 1) * dilations[0] + 1, (kernel[1] - 1) * dilations[1] + 1};
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, Pads(n, extent, strides));
  const std::string y =
      ctx.Temp(kMax ? "MaxPool" : "AveragePool", {ToNchw(ctx, n.inputs[0])}, n.outputs[0] + "/nchw", [&](NodeProto& p) {
        SetInts(p, "kernel_shape", kernel);
        SetInts(p, "strides", strides);
        SetPads(p, pads);
        if (kMax) SetInts(p, "dilations", dilations);
        if (!kMax) SetInt(p, "count_include_pad", 0);  // Lockstep's, TensorFlow's: the mean of what is inside
      });
  FromNchw(ctx, y, n.outputs[0]);
  return Status::Ok();
}

// MatMul and BatchMatMul: ONNX's MatMul broadcasts as both do; transposes become Transposes.
Status Product(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"transpose_a", "transpose_b", "precision"}));
  LS_ASSIGN_OR_RETURN(std::vector<std::string> in, ProductInputs(ctx, n));
  for (int side = 0; side < 2; ++side) {
    LS_ASSIGN_OR_RETURN(bool transpose, n.def.attrs.GetBoolOr(side == 0 ? "transpose_a" : "transpose_b", false));
    if (!transpose) continue;
    const int rank = n.input_specs[side].shape.rank();
    if (rank < 2) return InvalidArgument("a transposed operand must have rank >= 2");
    std::vector<int64_t> perm(rank);
    for (int i = 0; i < rank; ++i) perm[i] = i;
    std::swap(perm[rank - 1], perm[rank - 2]);
    in[side] = Transposed(ctx, in[side], perm, in[side] + "/transposed");
  }
  ctx.Node("MatMul", {in[0], in[1]}, n.outputs[0]);
  return Status::Ok();
}

Status BiasAdd(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  ctx.Node("Add", n.inputs, n.outputs[0]);  // the bias is [C], the last axis: numpy broadcasting
  return Status::Ok();
}

Status Normalize(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  const std::string centred = ctx.Temp("Sub", {n.inputs[0], n.inputs[1]}, n.outputs[0] + "/centred");
  ctx.Node("Div", {centred, n.inputs[2]}, n.outputs[0]);
  return Status::Ok();
}

// GELU as erf's (opset 17 has no Gelu): x * 0.5 * (1 + erf(x / sqrt 2)).
Status Gelu(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  const std::string& x = n.inputs[0];
  const std::string& o = n.outputs[0];
  const std::string erf = ctx.Temp("Erf", {ctx.Temp("Div", {x, ctx.Float(o + "/sqrt2", std::sqrt(2.0f))}, o + "/scaled")},
                                   o + "/erf");
  const std::string gate = ctx.Temp("Add", {erf, ctx.Float(o + "/one", 1.0f)}, o + "/gate");
  ctx.Node("Mul", {ctx.Temp("Mul", {x, ctx.Float(o + "/half", 0.5f)}, o + "/half_x"), gate}, o);
  return Status::Ok();
}

Status Silu(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  ctx.Node("Mul", {n.inputs[0], ctx.Temp("Sigmoid", {n.inputs[0]}, n.outputs[0] + "/sigmoid")}, n.outputs[0]);
  return Status::Ok();
}

Status Relu6(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  const std::string& o = n.outputs[0];
  ctx.Node("Clip", {n.inputs[0], ctx.Float(o + "/min", 0.0f), ctx.Float(o + "/max", 6.0f)}, o);
  return Status::Ok();
}

Status LeakyRelu(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"alpha"}));
  LS_ASSIGN_OR_RETURN(double alpha, n.def.attrs.GetFloatOr("alpha", 0.01));
  ctx.Node("LeakyRelu", n.inputs, n.outputs[0], [alpha](NodeProto& r) { SetFloat(r, "alpha", alpha); });
  return Status::Ok();
}

// An op whose one attr is "axis" (`fallback` when absent; required without one), under the
// ONNX name `onnx_op`.
Status WithAxis(ExportContext& ctx, const ExportNode& n, const std::string& onnx_op, std::optional<int64_t> fallback) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"axis"}));
  LS_ASSIGN_OR_RETURN(int64_t axis, fallback ? n.def.attrs.GetIntOr("axis", *fallback) : n.def.attrs.GetInt("axis"));
  ctx.Node(onnx_op, n.inputs, n.outputs[0], [axis](NodeProto& s) { SetInt(s, "axis", axis); });
  return Status::Ok();
}

Status SoftmaxLike(ExportContext& ctx, const ExportNode& n) { return WithAxis(ctx, n, n.def.op, -1); }
Status Concat(ExportContext& ctx, const ExportNode& n) { return WithAxis(ctx, n, "Concat", std::nullopt); }
Status Gather(ExportContext& ctx, const ExportNode& n) { return WithAxis(ctx, n, "Gather", 0); }

// Mean and Sum over attr axes (all axes without it): ReduceMean takes its axes as an attribute
// in opset 17, ReduceSum as an input.
Status Reduce(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"axes", "keep_dims"}));
  if (n.inputs.size() != 1) return Unimplemented("axes given as an input have no translation");
  LS_ASSIGN_OR_RETURN(bool keep, n.def.attrs.GetBoolOr("keep_dims", false));
  std::vector<int64_t> axes;
  if (n.def.attrs.Has("axes")) {
    LS_ASSIGN_OR_RETURN(std::span<const int64_t> a, n.def.attrs.GetInts("axes"));
    axes = Ints(a);
  }
  const bool mean = n.def.op == "Mean";
  std::vector<std::string> inputs = n.inputs;
  if (!mean && !axes.empty()) inputs.push_back(ctx.Int64s(n.outputs[0] + "/axes", axes));
  ctx.Node(mean ? "ReduceMean" : "ReduceSum", inputs, n.outputs[0], [&](NodeProto& r) {
    SetInt(r, "keepdims", keep ? 1 : 0);
    if (mean && !axes.empty()) SetInts(r, "axes", axes);
  });
  return Status::Ok();
}

Status Reshape(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"shape", "allowzero"}));
  LS_ASSIGN_OR_RETURN(bool allow_zero, n.def.attrs.GetBoolOr("allowzero", false));
  std::vector<std::string> inputs = n.inputs;
  if (inputs.size() == 1) {
    LS_ASSIGN_OR_RETURN(std::span<const int64_t> shape, n.def.attrs.GetInts("shape"));
    inputs.push_back(ctx.Int64s(n.outputs[0] + "/shape", Ints(shape)));
  }
  ctx.Node("Reshape", inputs, n.outputs[0], [allow_zero](NodeProto& r) {
    if (allow_zero) SetInt(r, "allowzero", 1);
  });
  return Status::Ok();
}

Status Flatten(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"axis"}));
  LS_ASSIGN_OR_RETURN(int64_t axis, n.def.attrs.GetIntOr("axis", 1));
  ctx.Node("Flatten", n.inputs, n.outputs[0], [axis](NodeProto& f) { SetInt(f, "axis", axis); });
  return Status::Ok();
}

Status Transpose(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"perm"}));
  std::vector<int64_t> perm;
  if (n.def.attrs.Has("perm")) {
    LS_ASSIGN_OR_RETURN(std::span<const int64_t> p, n.def.attrs.GetInts("perm"));
    perm = Ints(p);
  }
  ctx.Node("Transpose", n.inputs, n.outputs[0], [&perm](NodeProto& t) {
    if (!perm.empty()) SetInts(t, "perm", perm);
  });
  return Status::Ok();
}

Status Cast(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"dtype"}));
  LS_ASSIGN_OR_RETURN(DType to, n.def.attrs.GetDType("dtype"));
  ctx.Node("Cast", n.inputs, n.outputs[0], [to](NodeProto& c) { SetInt(c, "to", DTypeToOnnxElemType(to)); });
  return Status::Ok();
}

Status ArgMax(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"axis", "keep_dims", "select_last_index"}));
  LS_ASSIGN_OR_RETURN(int64_t axis, n.def.attrs.GetIntOr("axis", -1));
  LS_ASSIGN_OR_RETURN(bool keep, n.def.attrs.GetBoolOr("keep_dims", false));
  LS_ASSIGN_OR_RETURN(bool last, n.def.attrs.GetBoolOr("select_last_index", false));
  ctx.Node("ArgMax", n.inputs, n.outputs[0], [=](NodeProto& a) {
    SetInt(a, "axis", axis);
    SetInt(a, "keepdims", keep ? 1 : 0);
    SetInt(a, "select_last_index", last ? 1 : 0);
  });
  return Status::Ok();
}

// x repeated to `like`'s shape (the class names beside every row's scores).
Status BroadcastLike(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  ctx.Node("Expand", {n.inputs[0], ctx.Temp("Shape", {n.inputs[1]}, n.outputs[0] + "/shape")}, n.outputs[0]);
  return Status::Ok();
}

// LayerNormalize has no scale of its own (the layer multiplies after it): ONNX's
// LayerNormalization with a scale of ones.
Status LayerNormalize(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {"epsilon"}));
  LS_ASSIGN_OR_RETURN(double epsilon, n.def.attrs.GetFloatOr("epsilon", 1e-5));
  const Shape& in = n.input_specs[0].shape;
  if (in.rank() < 1 || in.dim(in.rank() - 1) < 0) return InvalidArgument("the last axis's size must be known");
  const int64_t width = in.dim(in.rank() - 1);
  const std::string ones = ctx.Initializer(n.outputs[0] + "/ones",
                                           Tensor::FromVector<float>(Shape{width}, std::vector<float>(width, 1.0f)));
  ctx.Node("LayerNormalization", {n.inputs[0], ones}, n.outputs[0], [epsilon](NodeProto& l) {
    SetInt(l, "axis", -1);
    SetFloat(l, "epsilon", epsilon);
  });
  return Status::Ok();
}

// Ops that are ONNX's under the same or another name, with no attrs.
const std::map<std::string_view, std::string_view>& Renamed() {
  static const std::map<std::string_view, std::string_view> ops = {
      {"Identity", "Identity"}, {"Add", "Add"},         {"Sub", "Sub"},         {"Mul", "Mul"},
      {"Div", "Div"},           {"Maximum", "Max"},     {"Minimum", "Min"},     {"Pow", "Pow"},
      {"Sqrt", "Sqrt"},         {"Exp", "Exp"},         {"Log", "Log"},         {"Neg", "Neg"},
      {"Abs", "Abs"},           {"Erf", "Erf"},         {"Reciprocal", "Reciprocal"},
      {"Relu", "Relu"},         {"Sigmoid", "Sigmoid"}, {"Tanh", "Tanh"},       {"Elu", "Elu"},
      {"Selu", "Selu"},         {"HardSwish", "HardSwish"}, {"Equal", "Equal"}, {"Less", "Less"},
      {"Greater", "Greater"},   {"Where", "Where"},     {"Slice", "Slice"}};
  return ops;
}

Status Rename(ExportContext& ctx, const ExportNode& n) {
  LS_RETURN_IF_ERROR(OnlyAttrs(n, {}));
  ctx.Node(std::string(Renamed().at(n.def.op)), n.inputs, n.outputs[0]);
  return Status::Ok();
}

const std::map<std::string_view, Translator>& Translators() {
  static const std::map<std::string_view, Translator> table = [] {
    std::map<std::string_view, Translator> t = {
        {"Conv2D", Conv2D},         {"DepthwiseConv2D", DepthwiseConv2D},
        {"MaxPool2D", Pool<true>},  {"AvgPool2D", Pool<false>},
        {"MatMul", Product},        {"BatchMatMul", Product},
        {"BiasAdd", BiasAdd},       {"Normalize", Normalize},
        {"Gelu", Gelu},             {"Silu", Silu},
        {"Relu6", Relu6},           {"LeakyRelu", LeakyRelu},
        {"Softmax", SoftmaxLike},   {"LogSoftmax", SoftmaxLike},
        {"Mean", Reduce},           {"Sum", Reduce},
        {"Reshape", Reshape},       {"Flatten", Flatten},
        {"Transpose", Transpose},   {"Concat", Concat},
        {"Cast", Cast},             {"ArgMax", ArgMax},
        {"Gather", Gather},         {"BroadcastLike", BroadcastLike},
        {"LayerNormalize", LayerNormalize}};
    for (const auto& [op, onnx_op] : Renamed()) t.emplace(op, Rename);
    return t;
  }();
  return table;
}

}  // namespace

const Translator* FindTranslator(std::string_view op) {
  auto it = Translators().find(op);
  return it == Translators().end() ? nullptr : &it->second;
}

}  // namespace lockstep::onnx_export
