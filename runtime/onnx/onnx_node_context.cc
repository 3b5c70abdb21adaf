// OnnxNodeContext: what a translator sees of one ONNX node.
#include "runtime/onnx/onnx_ops.h"

#include "runtime/import/constants.h"

namespace lockstep {

using onnx::AttributeProto;

OnnxNodeContext::OnnxNodeContext(OnnxGraphSink& sink, const onnx::NodeProto& node, int opset,
                                 std::vector<std::string> inputs, std::vector<std::optional<TensorSpec>> specs,
                                 std::string base_name)
    : sink_(sink), node_(node), opset_(opset), inputs_(std::move(inputs)), specs_(std::move(specs)),
      base_name_(std::move(base_name)) {}

const Tensor* OnnxNodeContext::ConstantInput(size_t i) const {
  return HasInput(i) ? sink_.ConstantValue(inputs_[i]) : nullptr;
}

StatusOr<int> OnnxNodeContext::InputRank(size_t i) const {
  if (i < specs_.size() && specs_[i]) return specs_[i]->shape.rank();
  return UnknownUntilRunTime("the rank of input " + std::to_string(i) + " is not known before run time");
}

std::string OnnxNodeContext::Emit(const std::string& op, std::vector<std::string> inputs, AttrMap attrs,
                                  std::string_view suffix) {
  return sink_.AddNode(suffix.empty() ? base_name_ : base_name_ + "/" + std::string(suffix), op, std::move(inputs),
                       std::move(attrs));
}

std::string OnnxNodeContext::EmitConstant(Tensor value, std::string_view suffix) {
  return sink_.AddConstant(suffix.empty() ? base_name_ : base_name_ + "/" + std::string(suffix), std::move(value));
}

OnnxNodeContext OnnxNodeContext::WithInputs(std::vector<std::string> inputs,
                                            std::vector<std::optional<TensorSpec>> specs,
                                            std::string_view suffix) const {
  return WithNode(node_, std::move(inputs), std::move(specs), suffix);
}

OnnxNodeContext OnnxNodeContext::WithNode(const onnx::NodeProto& node, std::vector<std::string> inputs,
                                          std::vector<std::optional<TensorSpec>> specs,
                                          std::string_view suffix) const {
  return OnnxNodeContext(sink_, node, opset_, std::move(inputs), std::move(specs),
                         base_name_ + "/" + std::string(suffix));
}

const AttributeProto* OnnxNodeContext::FindAttr(const std::string& name) const {
  for (const AttributeProto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

StatusOr<AttrMap> OnnxNodeContext::PlainAttrs() const {
  AttrMap attrs;
  for (const AttributeProto& a : node_.attribute()) {
    switch (a.type()) {
      case AttributeProto::INT: attrs.Set(a.name(), int64_t{a.i()}); break;
      case AttributeProto::FLOAT: attrs.Set(a.name(), static_cast<double>(a.f())); break;
      case AttributeProto::STRING: attrs.Set(a.name(), a.s()); break;
      case AttributeProto::INTS: attrs.Set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end())); break;
      default: return Unsupported("attribute '" + a.name() + "' of type " + AttributeProto::AttributeType_Name(a.type()));
    }
  }
  return attrs;
}

bool OnnxNodeContext::HasAttr(const std::string& name) const { return FindAttr(name) != nullptr; }

StatusOr<int64_t> OnnxNodeContext::IntAttr(const std::string& name, int64_t fallback) const {
  const AttributeProto* a = FindAttr(name);
  if (a == nullptr) return fallback;
  if (a->type() != AttributeProto::INT) return Error("attribute '" + name + "' is not an int");
  return a->i();
}

StatusOr<float> OnnxNodeContext::FloatAttr(const std::string& name, float fallback) const {
  const AttributeProto* a = FindAttr(name);
  if (a == nullptr) return fallback;
  if (a->type() != AttributeProto::FLOAT) return Error("attribute '" + name + "' is not a float");
  return a->f();
}

StatusOr<std::string> OnnxNodeContext::StringAttr(const std::string& name, std::string fallback) const {
  const AttributeProto* a = FindAttr(name);
  if (a == nullptr) return fallback;
  if (a->type() != AttributeProto::STRING) return Error("attribute '" + name + "' is not a string");
  return a->s();
}

StatusOr<std::optional<std::vector<int64_t>>> OnnxNodeContext::IntsAttr(const std::string& name) const {
  const AttributeProto* a = FindAttr(name);
  if (a == nullptr) return std::optional<std::vector<int64_t>>();
  if (a->type() != AttributeProto::INTS) return Error("attribute '" + name + "' is not a list of ints");
  return std::optional<std::vector<int64_t>>(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
}

StatusOr<const onnx::GraphProto*> OnnxNodeContext::GraphAttr(const std::string& name) const {
  const AttributeProto* a = FindAttr(name);
  if (a == nullptr) return Error("attribute '" + name + "' is missing");
  if (a->type() != AttributeProto::GRAPH || !a->has_g()) return Error("attribute '" + name + "' is not a graph");
  return &a->g();
}

StatusOr<const onnx::TensorProto*> OnnxNodeContext::TensorAttr(const std::string& name) const {
  const AttributeProto* a = FindAttr(name);
  if (a == nullptr) return static_cast<const onnx::TensorProto*>(nullptr);
  if (a->type() != AttributeProto::TENSOR) return Error("attribute '" + name + "' is not a tensor");
  return &a->t();
}

StatusOr<std::vector<int64_t>> OnnxNodeContext::ConstantInts(size_t i, std::string_view what) const {
  if (std::optional<std::vector<int64_t>> values = IntValues(ConstantInput(i))) return *values;
  return Unsupported(std::string(what) + " (input " + std::to_string(i) +
                     ") must be a constant int32 or int64 tensor, not one computed at run time");
}

StatusOr<std::optional<std::vector<int64_t>>> OnnxNodeContext::AxesAttrOrInput(const std::string& attr,
                                                                                size_t input) const {
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, IntsAttr(attr));
  if (axes) return axes;
  if (!HasInput(input)) return std::optional<std::vector<int64_t>>();
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> values, ConstantInts(input, attr));
  return std::optional<std::vector<int64_t>>(std::move(values));
}

Status OnnxNodeContext::Error(const std::string& what) const {
  const std::string name = node_.name().empty() ? "(unnamed)" : node_.name();
  return InvalidArgument("node '" + name + "' (" + node_.op_type() + "): " + what);
}

Status OnnxNodeContext::Unsupported(const std::string& what) const {
  const std::string name = node_.name().empty() ? "(unnamed)" : node_.name();
  return Unimplemented("node '" + name + "' (" + node_.op_type() + "): " + what);
}

Status CheckOnnxOpTranslated(const onnx::NodeProto& node) {
  const std::string label = "node '" + node.name() + "' (" + node.op_type() + ")";
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return Unimplemented(label + ": operators of domain '" + node.domain() + "' are not supported");
  }
  if (FindOnnxTranslator(node.op_type()) == nullptr) return Unimplemented(label + ": op " + node.op_type() + " is not supported");
  return Status::Ok();
}

Status OnnxNodeContext::UnknownUntilRunTime(const std::string& what) const {
  sink_.NoteUnknownUntilRunTime();
  return Unsupported(what);
}

}  // namespace lockstep
