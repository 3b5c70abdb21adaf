// The translators, one small function per TensorFlow op (or family), and the table.
#include "runtime/saved_model/tf_ops.h"

#include <algorithm>
#include <map>

#include "runtime/import/constants.h"
#include "runtime/import/dilated_filter.h"
#include "runtime/saved_model/tensor_proto.h"
#include "runtime/saved_model/tf_translators.h"

namespace lockstep {

Status TranslationContext::Error(const std::string& what) const {
  return InvalidArgument("node '" + node().name() + "' (op " + node().op() + "): " + what);
}

StatusOr<DType> TranslationContext::TypeAttr(const std::string& attr) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end() || it->second.value_case() != tensorflow::AttrValue::kType) {
    return Error("attr '" + attr + "' is missing or not a type");
  }
  StatusOr<DType> dtype = DataTypeToDType(it->second.type());
  if (!dtype.ok()) return Error("attr '" + attr + "': " + dtype.status().message());
  return dtype;
}

StatusOr<std::string> TranslationContext::StringAttr(const std::string& attr, std::string fallback) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end()) return fallback;
  if (it->second.value_case() != tensorflow::AttrValue::kS)
    return Error("attr '" + attr + "' is not a string");
  return it->second.s();
}

StatusOr<bool> TranslationContext::BoolAttr(const std::string& attr, bool fallback) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end()) return fallback;
  if (it->second.value_case() != tensorflow::AttrValue::kB) return Error("attr '" + attr + "' is not a bool");
  return it->second.b();
}

StatusOr<std::vector<int64_t>> TranslationContext::IntListAttr(const std::string& attr) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end() || it->second.value_case() != tensorflow::AttrValue::kList) {
    return Error("attr '" + attr + "' is missing or not a list");
  }
  return std::vector<int64_t>(it->second.list().i().begin(), it->second.list().i().end());
}

StatusOr<int64_t> TranslationContext::IntAttr(const std::string& attr, int64_t fallback) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end()) return fallback;
  if (it->second.value_case() != tensorflow::AttrValue::kI) return Error("attr '" + attr + "' is not an int");
  return it->second.i();
}

StatusOr<std::vector<DType>> TranslationContext::TypeListAttr(const std::string& attr) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end() || it->second.value_case() != tensorflow::AttrValue::kList) {
    return Error("attr '" + attr + "' is missing or not a list");
  }
  std::vector<DType> types;
  for (int t : it->second.list().type()) {
    StatusOr<DType> dtype = DataTypeToDType(static_cast<tensorflow::DataType>(t));
    if (!dtype.ok()) return Error("attr '" + attr + "': " + dtype.status().message());
    types.push_back(*dtype);
  }
  return types;
}

StatusOr<std::vector<Shape>> TranslationContext::ShapeListAttr(const std::string& attr) const {
  auto it = node().attr().find(attr);
  if (it == node().attr().end() || it->second.value_case() != tensorflow::AttrValue::kList) {
    return Error("attr '" + attr + "' is missing or not a list");
  }
  std::vector<Shape> shapes;
  for (const tensorflow::TensorShapeProto& proto : it->second.list().shape()) {
    if (proto.unknown_rank()) return Error("attr '" + attr + "' holds a shape of unknown rank");
    std::vector<int64_t> dims;
    for (const auto& d : proto.dim()) dims.push_back(d.size() < 0 ? -1 : d.size());
    StatusOr<Shape> shape = Shape::FromDims(dims);
    if (!shape.ok()) return Error("attr '" + attr + "': " + shape.status().message());
    shapes.push_back(*shape);
  }
  return shapes;
}

namespace {

// One Lockstep op of the same inputs, no attrs: TF's element-wise ops (numpy broadcasting on
// both sides), activations, and softmaxes.
template <const char* kOp>
Status Direct(TranslationContext& ctx, std::vector<std::string>* outputs) {
  outputs->push_back(ctx.Emit(kOp, ctx.inputs(), {}));
  return Status::Ok();
}
constexpr char kAdd[] = "Add";
constexpr char kSub[] = "Sub";
constexpr char kMul[] = "Mul";
constexpr char kDiv[] = "Div";
constexpr char kRelu[] = "Relu";
constexpr char kSigmoid[] = "Sigmoid";
constexpr char kTanh[] = "Tanh";
constexpr char kRelu6[] = "Relu6";
constexpr char kElu[] = "Elu";
constexpr char kSelu[] = "Selu";
constexpr char kIdentity[] = "Identity";
constexpr char kMaximum[] = "Maximum";
constexpr char kMinimum[] = "Minimum";
// TensorFlow's run over the last axis, as Lockstep's do by default.
constexpr char kSoftmax[] = "Softmax";
constexpr char kLogSoftmax[] = "LogSoftmax";

Status Const(TranslationContext& ctx, std::vector<std::string>* outputs) {
  auto it = ctx.node().attr().find("value");
  if (it == ctx.node().attr().end() || !it->second.has_tensor()) return ctx.Error("no 'value' tensor");
  StatusOr<Tensor> value = TensorFromProto(it->second.tensor());
  if (!value.ok()) return ctx.Error(value.status().message());
  outputs->push_back(ctx.EmitConstant(std::move(*value)));
  return Status::Ok();
}

// Outputs its inputs unchanged (several at once); no node is needed.
Status IdentityN(TranslationContext& ctx, std::vector<std::string>* outputs) {
  *outputs = ctx.inputs();
  return Status::Ok();
}

Status MatMul(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(bool ta, ctx.BoolAttr("transpose_a", false));
  LS_ASSIGN_OR_RETURN(bool tb, ctx.BoolAttr("transpose_b", false));
  AttrMap attrs;
  if (ta) attrs.Set("transpose_a", true);
  if (tb) attrs.Set("transpose_b", true);
  outputs->push_back(ctx.Emit("MatMul", ctx.inputs(), std::move(attrs)));
  return Status::Ok();
}

Status BiasAdd(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::string format, ctx.StringAttr("data_format", "NHWC"));
  if (format != "NHWC") return ctx.Error("data_format " + format + " is not supported (only NHWC)");
  outputs->push_back(ctx.Emit("BiasAdd", ctx.inputs(), {}));
  return Status::Ok();
}

// The integer values of constant input `i` (an axis, a shape, a list of axes).
StatusOr<std::vector<int64_t>> ConstantInts(const TranslationContext& ctx, size_t i, const char* what) {
  if (std::optional<std::vector<int64_t>> values = IntValues(ctx.ConstantInput(i))) return *values;
  return ctx.Error(std::string(what) + " must be a constant int32 or int64 tensor (computed at run time here)");
}

StatusOr<int64_t> ConstantAxis(const TranslationContext& ctx, size_t i) {
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> v, ConstantInts(ctx, i, "the axis"));
  if (v.size() != 1) return ctx.Error("the axis must be one value");
  return v[0];
}

Status CheckInputs(const TranslationContext& ctx, size_t n) {
  if (ctx.inputs().size() != n) return ctx.Error("expects " + std::to_string(n) + " inputs");
  return Status::Ok();
}

// Reshape(tensor, shape): a constant shape is an attribute (Keras writes [-1, ...] for the
// batch); a computed one (Keras's Flatten: Shape -> StridedSlice -> Pack) is read per request,
// where 0 means a dimension of 0 as in TensorFlow.
Status Reshape(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  if (std::optional<std::vector<int64_t>> shape = IntValues(ctx.ConstantInput(1))) {
    outputs->push_back(ctx.Emit("Reshape", {ctx.inputs()[0]}, AttrMap{{"shape", std::move(*shape)}}));
  } else {
    outputs->push_back(ctx.Emit("Reshape", ctx.inputs(), AttrMap{{"allowzero", true}}));
  }
  return Status::Ok();
}

Status Squeeze(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 1));
  auto it = ctx.node().attr().find("squeeze_dims");
  std::vector<int64_t> axes;
  if (it != ctx.node().attr().end()) {
    LS_ASSIGN_OR_RETURN(axes, ctx.IntListAttr("squeeze_dims"));
  }
  outputs->push_back(ctx.Emit("Squeeze", {ctx.inputs()[0]}, AttrMap{{"axes", std::move(axes)}}));
  return Status::Ok();
}

Status ExpandDims(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  LS_ASSIGN_OR_RETURN(int64_t axis, ConstantAxis(ctx, 1));
  outputs->push_back(ctx.Emit("ExpandDims", {ctx.inputs()[0]}, AttrMap{{"axis", axis}}));
  return Status::Ok();
}

// ConcatV2(values..., axis).
Status ConcatV2(TranslationContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.inputs().size() < 2) return ctx.Error("expects values and an axis");
  LS_ASSIGN_OR_RETURN(int64_t axis, ConstantAxis(ctx, ctx.inputs().size() - 1));
  std::vector<std::string> values(ctx.inputs().begin(), ctx.inputs().end() - 1);
  outputs->push_back(ctx.Emit("Concat", std::move(values), AttrMap{{"axis", axis}}));
  return Status::Ok();
}

// The window attrs TensorFlow's Conv2D and pools share: NHWC only, SAME or VALID padding,
// strides (and ksize) as [1, h, w, 1], which Lockstep's ops read as they are.
Status WindowAttrs(const TranslationContext& ctx, bool has_ksize, AttrMap* attrs) {
  LS_ASSIGN_OR_RETURN(std::string format, ctx.StringAttr("data_format", "NHWC"));
  if (format != "NHWC") return ctx.Error("data_format " + format + " is not supported (only NHWC)");
  LS_ASSIGN_OR_RETURN(std::string padding, ctx.StringAttr("padding", ""));
  if (padding != "SAME" && padding != "VALID") {
    return ctx.Error("padding '" + padding + "' is not supported (only SAME and VALID)");
  }
  attrs->Set("padding", padding);
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.IntListAttr("strides"));
  if (strides.size() != 4 || strides[0] != 1 || strides[3] != 1) {
    return ctx.Error("strides must be [1, h, w, 1]");
  }
  attrs->Set("strides", std::move(strides));
  if (has_ksize) {
    LS_ASSIGN_OR_RETURN(std::vector<int64_t> ksize, ctx.IntListAttr("ksize"));
    if (ksize.size() != 4 || ksize[0] != 1 || ksize[3] != 1) return ctx.Error("ksize must be [1, h, w, 1]");
    attrs->Set("ksize", std::move(ksize));
  }
  return Status::Ok();
}

constexpr char kConv2D[] = "Conv2D";
constexpr char kDepthwiseConv2D[] = "DepthwiseConv2D";

// Conv2D and DepthwiseConv2dNative: the same attrs. Dilations [1, dh, dw, 1] spread a constant
// filter [KH, KW, ...] (runtime/import/dilated_filter.h).
template <const char* kOp>
Status Convolution(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  AttrMap attrs;
  LS_RETURN_IF_ERROR(WindowAttrs(ctx, false, &attrs));
  std::vector<int64_t> dilations{1, 1, 1, 1};
  if (ctx.node().attr().count("dilations") != 0) {
    LS_ASSIGN_OR_RETURN(dilations, ctx.IntListAttr("dilations"));
  }
  if (dilations.size() != 4 || dilations[0] != 1 || dilations[3] != 1) return ctx.Error("dilations must be [1, h, w, 1]");
  std::vector<std::string> inputs = ctx.inputs();
  if (dilations[1] != 1 || dilations[2] != 1) {
    const Tensor* filter = ctx.ConstantInput(1);
    if (filter == nullptr) return ctx.Error("dilations of a filter that is not a constant are not supported");
    StatusOr<Tensor> spread = DilateFilter(*filter, 0, dilations[1], dilations[2]);
    if (!spread.ok()) return ctx.Error(spread.status().message());
    inputs[1] = ctx.EmitConstant(std::move(*spread), "filter_dilated");
  }
  outputs->push_back(ctx.Emit(kOp, std::move(inputs), std::move(attrs)));
  return Status::Ok();
}

template <const char* kOp>
Status Pool(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 1));
  AttrMap attrs;
  LS_RETURN_IF_ERROR(WindowAttrs(ctx, true, &attrs));
  outputs->push_back(ctx.Emit(kOp, ctx.inputs(), std::move(attrs)));
  return Status::Ok();
}
constexpr char kMaxPool2D[] = "MaxPool2D";
constexpr char kAvgPool2D[] = "AvgPool2D";

// Mean / Sum(input, reduction_indices; keep_dims).
template <const char* kOp>
Status Reduce(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ConstantInts(ctx, 1, "reduction_indices"));
  LS_ASSIGN_OR_RETURN(bool keep, ctx.BoolAttr("keep_dims", false));
  // TensorFlow reduces nothing for an empty list; Lockstep's empty list means the same, but
  // its absent list means every axis, so the list is always given.
  outputs->push_back(ctx.Emit(kOp, {ctx.inputs()[0]}, AttrMap{{"axes", std::move(axes)}, {"keep_dims", keep}}));
  return Status::Ok();
}
constexpr char kMean[] = "Mean";
constexpr char kSum[] = "Sum";

Status Cast(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 1));
  LS_ASSIGN_OR_RETURN(DType to, ctx.TypeAttr("DstT"));
  outputs->push_back(ctx.Emit("Cast", ctx.inputs(), AttrMap{{"dtype", to}}));
  return Status::Ok();
}

// ArgMax(input, dimension; output_type int64 or int32). Lockstep's ArgMax gives int64.
Status ArgMax(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_RETURN_IF_ERROR(CheckInputs(ctx, 2));
  LS_ASSIGN_OR_RETURN(int64_t axis, ConstantAxis(ctx, 1));
  DType out = DType::kInt64;
  if (ctx.node().attr().count("output_type") != 0) {
    LS_ASSIGN_OR_RETURN(out, ctx.TypeAttr("output_type"));
  }
  if (out == DType::kInt64) {
    outputs->push_back(ctx.Emit("ArgMax", {ctx.inputs()[0]}, AttrMap{{"axis", axis}}));
  } else if (out == DType::kInt32) {
    const std::string index = ctx.Emit("ArgMax", {ctx.inputs()[0]}, AttrMap{{"axis", axis}}, "int64");
    outputs->push_back(ctx.Emit("Cast", {index}, AttrMap{{"dtype", DType::kInt32}}));
  } else {
    return ctx.Error("output_type must be int64 or int32");
  }
  return Status::Ok();
}

// Computes nothing: only control edges lead to it, which the importer drops.
Status NoOp(TranslationContext&, std::vector<std::string>*) { return Status::Ok(); }

// The string values of constant input `i` (a scalar or a list of keys).
StatusOr<std::vector<std::string>> ConstantStrings(const TranslationContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.ConstantInput(i);
  if (t == nullptr || t->dtype() != DType::kString) return ctx.Error(std::string(what) + " must be constant strings");
  const auto values = t->data<std::string>();
  return std::vector<std::string>(values.begin(), values.end());
}

// ParseExample (TF1) and ParseExampleV2 (TF2) of dense features only: one ParseExampleFeature
// per dense key. With no sparse features the dense values are the op's first outputs.
//   ParseExample:   serialized, names, sparse_keys x Nsparse, dense_keys x Ndense (scalars),
//                   dense_defaults x Ndense
//   ParseExampleV2: serialized, names, sparse_keys, dense_keys, ragged_keys (lists),
//                   dense_defaults x len(dense_keys)
template <bool kV2>
Status ParseExample(TranslationContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(std::vector<DType> types, ctx.TypeListAttr("Tdense"));
  LS_ASSIGN_OR_RETURN(std::vector<Shape> shapes, ctx.ShapeListAttr("dense_shapes"));
  LS_ASSIGN_OR_RETURN(int64_t num_sparse, ctx.IntAttr(kV2 ? "num_sparse" : "Nsparse", 0));
  if (num_sparse != 0) return ctx.Error("sparse features are not supported (only dense ones)");
  const size_t num_dense = types.size();
  if (shapes.size() != num_dense) return ctx.Error("Tdense and dense_shapes differ in length");
  std::vector<std::string> keys;
  size_t first_default = 0;
  if constexpr (kV2) {
    if (ctx.inputs().size() != 5 + num_dense) return ctx.Error("expects " + std::to_string(5 + num_dense) + " inputs");
    LS_ASSIGN_OR_RETURN(std::vector<std::string> sparse, ConstantStrings(ctx, 2, "sparse_keys"));
    LS_ASSIGN_OR_RETURN(keys, ConstantStrings(ctx, 3, "dense_keys"));
    LS_ASSIGN_OR_RETURN(std::vector<std::string> ragged, ConstantStrings(ctx, 4, "ragged_keys"));
    if (!sparse.empty()) return ctx.Error("sparse features are not supported (only dense ones)");
    if (!ragged.empty()) return ctx.Error("ragged features are not supported (only dense ones)");
    first_default = 5;
  } else {
    if (ctx.inputs().size() != 2 + 2 * num_dense) return ctx.Error("expects " + std::to_string(2 + 2 * num_dense) + " inputs");
    for (size_t k = 0; k < num_dense; ++k) {
      LS_ASSIGN_OR_RETURN(std::vector<std::string> key, ConstantStrings(ctx, 2 + k, "dense_keys"));
      if (key.size() != 1) return ctx.Error("dense key " + std::to_string(k) + " is not one string");
      keys.push_back(key[0]);
    }
    first_default = 2 + num_dense;
  }
  if (keys.size() != num_dense) return ctx.Error("dense_keys and Tdense differ in length");
  for (size_t k = 0; k < num_dense; ++k) {
    if (!shapes[k].IsFullyDefined()) {
      return ctx.Error("dense feature '" + keys[k] + "' has variable length (shape " + shapes[k].ToString() +
                       "), which is not supported");
    }
    AttrMap attrs{{"key", keys[k]}, {"dtype", types[k]}, {"shape", shapes[k]}};
    outputs->push_back(ctx.Emit("ParseExampleFeature", {ctx.inputs()[0], ctx.inputs()[first_default + k]},
                                std::move(attrs), "dense_" + std::to_string(k)));
  }
  return Status::Ok();
}

const std::map<std::string, OpTranslator, std::less<>>& Table() {
  static const std::map<std::string, OpTranslator, std::less<>> table{
      {"Add", Direct<kAdd>},
      {"AddN", tf_import::AddN},
      {"AddV2", Direct<kAdd>},
      {"ArgMax", ArgMax},
      {"AvgPool", Pool<kAvgPool2D>},
      {"BiasAdd", BiasAdd},
      {"Cast", Cast},
      {"ConcatV2", ConcatV2},
      {"Const", Const},
      {"Conv2D", Convolution<kConv2D>},
      {"DepthwiseConv2dNative", Convolution<kDepthwiseConv2D>},
      {"Elu", Direct<kElu>},
      {"ExpandDims", ExpandDims},
      {"Fill", tf_import::Fill},
      {"FusedBatchNorm", tf_import::FusedBatchNorm},
      {"FusedBatchNormV2", tf_import::FusedBatchNorm},
      {"FusedBatchNormV3", tf_import::FusedBatchNorm},
      {"Identity", Direct<kIdentity>},
      {"IdentityN", IdentityN},
      {"LogSoftmax", Direct<kLogSoftmax>},
      {"MatMul", MatMul},
      {"MaxPool", Pool<kMaxPool2D>},
      {"Maximum", Direct<kMaximum>},
      {"Mean", Reduce<kMean>},
      {"Minimum", Direct<kMinimum>},
      {"MirrorPad", tf_import::Pad},
      {"NoOp", NoOp},
      {"ParseExample", ParseExample<false>},
      {"ParseExampleV2", ParseExample<true>},
      {"Mul", Direct<kMul>},
      {"Pack", tf_import::Pack},
      {"Pad", tf_import::Pad},
      {"PadV2", tf_import::Pad},
      {"RealDiv", Direct<kDiv>},
      {"Relu", Direct<kRelu>},
      {"Relu6", Direct<kRelu6>},
      {"Reshape", Reshape},
      {"Rsqrt", tf_import::Rsqrt},
      {"Selu", Direct<kSelu>},
      {"Shape", tf_import::Shape},
      {"Sigmoid", Direct<kSigmoid>},
      {"Snapshot", Direct<kIdentity>},
      {"Softmax", Direct<kSoftmax>},
      {"Square", tf_import::Square},
      {"Squeeze", Squeeze},
      {"StopGradient", Direct<kIdentity>},
      {"StridedSlice", tf_import::StridedSlice},
      {"Sub", Direct<kSub>},
      {"Sum", Reduce<kSum>},
      {"Tanh", Direct<kTanh>},
      {"Transpose", tf_import::Transpose},
  };
  return table;
}

}  // namespace

OpTranslator FindOpTranslator(std::string_view op) {
  auto it = Table().find(op);
  return it == Table().end() ? nullptr : it->second;
}

std::vector<std::string> TranslatedOps() {
  std::vector<std::string> ops;
  for (const auto& [name, translator] : Table()) ops.push_back(name);
  return ops;
}

}  // namespace lockstep
