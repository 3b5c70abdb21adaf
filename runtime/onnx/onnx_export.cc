#include "runtime/onnx/onnx_export.h"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include "runtime/graph_analysis.h"
#include "runtime/onnx/onnx_checks.h"
#include "runtime/onnx/onnx_export_context.h"
#include "runtime/onnx/onnx_tensor.h"

namespace lockstep {
namespace onnx_export {

std::string ExportContext::Fresh(const std::string& base) {
  std::string name = base;
  for (int k = 1; !used_.insert(name).second; ++k) name = base + "_" + std::to_string(k);
  return name;
}

std::string ExportContext::Node(const std::string& op_type, std::vector<std::string> inputs, const std::string& output,
                                const std::function<void(onnx::NodeProto&)>& attrs) {
  onnx::NodeProto& node = *graph_.add_node();
  node.set_op_type(op_type);
  node.set_name(output);
  for (std::string& in : inputs) node.add_input(std::move(in));
  node.add_output(output);
  if (attrs) attrs(node);
  return output;
}

std::string ExportContext::Temp(const std::string& op_type, std::vector<std::string> inputs, const std::string& base,
                                const std::function<void(onnx::NodeProto&)>& attrs) {
  return Node(op_type, std::move(inputs), Fresh(base), attrs);
}

std::string ExportContext::Initializer(const std::string& base, const Tensor& value) {
  const std::string name = Fresh(base);
  *graph_.add_initializer() = TensorToOnnx(value, name);
  return name;
}

std::string ExportContext::Int64s(const std::string& base, const std::vector<int64_t>& values) {
  return Initializer(base, Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(values.size())}, values));
}

std::string ExportContext::Float(const std::string& base, float value) {
  return Initializer(base, Tensor::Scalar<float>(value));
}

std::string ExportContext::RoundedToBf16(const std::string& value, DType dtype) {
  auto it = rounded_.find(value);
  if (it != rounded_.end()) return it->second;
  std::string bf16 = value;
  if (dtype != DType::kBFloat16) {
    bf16 = Temp("Cast", {value}, value + "/bf16", [](onnx::NodeProto& n) { SetInt(n, "to", onnx::TensorProto::BFLOAT16); });
  }
  const std::string back =
      Temp("Cast", {bf16}, value + "/bf16_float", [](onnx::NodeProto& n) { SetInt(n, "to", onnx::TensorProto::FLOAT); });
  return rounded_[value] = back;
}

void SetInt(onnx::NodeProto& node, const std::string& name, int64_t value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void SetInts(onnx::NodeProto& node, const std::string& name, std::span<const int64_t> values) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
}

void SetFloat(onnx::NodeProto& node, const std::string& name, double value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(static_cast<float>(value));
}

void SetString(onnx::NodeProto& node, const std::string& name, const std::string& value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(value);
}

namespace {

// A signature entry's type: its element type and shape, -1 dimensions named for the caller.
void SetValueInfo(const TensorBinding& b, onnx::ValueInfoProto& info) {
  info.set_name(b.key);
  onnx::TypeProto_Tensor& type = *info.mutable_type()->mutable_tensor_type();
  type.set_elem_type(DTypeToOnnxElemType(b.dtype));
  onnx::TensorShapeProto& shape = *type.mutable_shape();
  for (int i = 0; i < b.shape.rank(); ++i) {
    onnx::TensorShapeProto_Dimension& d = *shape.add_dim();
    if (b.shape.dim(i) >= 0) {
      d.set_dim_value(b.shape.dim(i));
    } else {
      d.set_dim_param(i == 0 ? "batch" : b.key + "_" + std::to_string(i));
    }
  }
}

// The nodes the signature's outputs depend on, as flags by node index.
std::vector<bool> NeededNodes(const GraphAnalysis& a, const std::vector<ValueId>& outputs) {
  std::vector<bool> needed(a.ops.size(), false);
  std::vector<int> stack;
  for (ValueId v : outputs) stack.push_back(v.node);
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    if (needed[n]) continue;
    needed[n] = true;
    for (ValueId in : a.inputs[n]) stack.push_back(in.node);
  }
  return needed;
}

std::string ValueName(const NodeDef& node, int output) {
  return output == 0 ? node.name : node.name + ":" + std::to_string(output);
}

}  // namespace

StatusOr<onnx::ModelProto> Export(const Model& model, std::string_view signature_name) {
  const Signature* signature = model.graph.FindSignature(signature_name);
  if (signature == nullptr) {
    std::string names;
    for (const Signature& s : model.graph.signatures) names += (names.empty() ? "" : ", ") + s.name;
    return NotFound("the model has no signature '" + std::string(signature_name) + "' (it has: " + names + ")");
  }
  LS_ASSIGN_OR_RETURN(GraphAnalysis analysis, AnalyzeGraph(model));

  onnx::ModelProto proto;
  proto.set_ir_version(8);  // opset 17's
  proto.set_producer_name("lockstep");
  proto.set_producer_version(model.graph.metadata.count("lockstep_version") ? model.graph.metadata.at("lockstep_version")
                                                                           : "");
  onnx::OperatorSetIdProto& opset = *proto.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOnnxExportOpset);
  for (const auto& [key, value] : model.graph.metadata) {
    onnx::StringStringEntryProto& entry = *proto.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  }
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(model.graph.metadata.count("model_name") ? model.graph.metadata.at("model_name") : "lockstep");

  ExportContext ctx(graph);
  std::set<std::string> keys;
  for (const TensorBinding& b : signature->inputs) {
    if (!keys.insert(b.key).second) return InvalidArgument("signature '" + signature->name + "': key '" + b.key + "' is used twice");
  }
  for (const TensorBinding& b : signature->outputs) {
    if (!keys.insert(b.key).second) {
      return InvalidArgument("signature '" + signature->name + "': key '" + b.key +
                             "' names an input and an output, or two outputs; ONNX names every value once");
    }
  }
  for (const std::string& key : keys) ctx.Reserve(key);

  // Graph inputs: the Input nodes the signature feeds, named by their keys.
  std::map<std::string, std::string, std::less<>> names;  // our value ref -> ONNX name
  for (const TensorBinding& b : signature->inputs) {
    LS_ASSIGN_OR_RETURN(ValueId v, analysis.Resolve(b.tensor));
    if (model.graph.nodes[v.node].op != kInputOp) {
      return Unimplemented("signature '" + signature->name + "': input '" + b.key + "' feeds '" + b.tensor +
                           "', which is not an Input node; ONNX feeds only graph inputs");
    }
    names[ValueName(model.graph.nodes[v.node], v.output)] = b.key;
    SetValueInfo(b, *graph.add_input());
  }
  std::vector<ValueId> outputs;
  for (const TensorBinding& b : signature->outputs) {
    LS_ASSIGN_OR_RETURN(ValueId v, analysis.Resolve(b.tensor));
    outputs.push_back(v);
  }

  const std::vector<bool> needed = NeededNodes(analysis, outputs);
  for (int n : analysis.topological_order) {
    if (!needed[n]) continue;
    const NodeDef& def = model.graph.nodes[n];
    ExportNode node{def, {}, {}, {}, analysis.outputs[n]};
    for (ValueId in : analysis.inputs[n]) {
      node.inputs.push_back(names.at(ValueName(model.graph.nodes[in.node], in.output)));
      node.input_specs.push_back(analysis.Spec(in));
    }
    if (def.op == kInputOp) {
      if (!names.count(def.name)) {
        return InvalidArgument("node '" + def.name + "' is an input the signature '" + signature->name +
                               "' does not feed, and its outputs need it");
      }
      continue;
    }
    for (size_t k = 0; k < node.output_specs.size(); ++k) {
      const std::string ref = ValueName(def, static_cast<int>(k));
      node.outputs.push_back(names[ref] = ctx.Fresh(ref));
    }
    if (def.op == kConstOp || def.op == kVariableOp) {
      LS_ASSIGN_OR_RETURN(std::string weight, def.attrs.GetString("weight"));
      auto w = model.weights.find(weight);
      if (w == model.weights.end()) return NotFound("node '" + def.name + "': weight '" + weight + "' is missing");
      *graph.add_initializer() = TensorToOnnx(w->second, node.outputs[0]);
      continue;
    }
    const Translator* translate = FindTranslator(def.op);
    if (translate == nullptr) {
      return Unimplemented("node '" + def.name + "': op " + def.op + " has no ONNX translation");
    }
    LS_RETURN_IF_ERROR((*translate)(ctx, node).WithPrefix("node '" + def.name + "' (" + def.op + ")"));
  }

  for (size_t i = 0; i < signature->outputs.size(); ++i) {
    const TensorBinding& b = signature->outputs[i];
    const ValueId v = outputs[i];
    ctx.Node("Identity", {names.at(ValueName(model.graph.nodes[v.node], v.output))}, b.key);
    SetValueInfo(b, *graph.add_output());
  }

  // What ONNX itself says of the result, on a copy: inference writes value_info, which the file
  // need not carry.
  onnx::ModelProto checked = proto;
  Status s = CheckAndInferOnnxShapes(checked, {});
  if (!s.ok()) return Internal("the exported model fails ONNX's own checks: " + s.message());
  return proto;
}

}  // namespace onnx_export

StatusOr<onnx::ModelProto> ExportOnnxModel(const Model& model, std::string_view signature) {
  return onnx_export::Export(model, signature);
}

Status WriteOnnxModel(const Model& model, std::string_view signature, const std::filesystem::path& file) {
  LS_ASSIGN_OR_RETURN(onnx::ModelProto proto, ExportOnnxModel(model, signature));
  const size_t bytes = proto.ByteSizeLong();
  if (bytes >= (size_t{1} << 31)) {
    return InvalidArgument("the ONNX model would take " + std::to_string(bytes) +
                           " bytes; protobuf writes at most 2 GiB in one message");
  }
  std::filesystem::path temp = file;
  temp += ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out || !proto.SerializeToOstream(&out) || !out.flush()) {
      std::error_code ec;
      std::filesystem::remove(temp, ec);
      return InvalidArgument("cannot write " + temp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, file, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return InvalidArgument("cannot rename " + temp.string() + " to " + file.string() + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace lockstep
