// The translators, one small function per TensorFlow op (or family), and the table.
#include "runtime/saved_model/tf_ops.h"

#include <algorithm>
#include <map>

#include "runtime/saved_model/tensor_proto.h"

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
constexpr char kIdentity[] = "Identity";
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

const std::map<std::string, OpTranslator, std::less<>>& Table() {
  static const std::map<std::string, OpTranslator, std::less<>> table{
      {"Add", Direct<kAdd>},
      {"AddV2", Direct<kAdd>},
      {"BiasAdd", BiasAdd},
      {"Const", Const},
      {"Identity", Direct<kIdentity>},
      {"IdentityN", IdentityN},
      {"LogSoftmax", Direct<kLogSoftmax>},
      {"MatMul", MatMul},
      {"Mul", Direct<kMul>},
      {"RealDiv", Direct<kDiv>},
      {"Relu", Direct<kRelu>},
      {"Sigmoid", Direct<kSigmoid>},
      {"Snapshot", Direct<kIdentity>},
      {"Softmax", Direct<kSoftmax>},
      {"StopGradient", Direct<kIdentity>},
      {"Sub", Direct<kSub>},
      {"Tanh", Direct<kTanh>},
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
