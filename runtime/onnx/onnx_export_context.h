// Internal to runtime/onnx/: what the exporter (onnx_export.cc) hands each op's translation
// (onnx_export_ops.cc). A translation reads its node, its inputs' ONNX names and Lockstep
// types, and writes ONNX nodes into the graph through the context, ending with nodes whose
// outputs carry the names it was given.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "onnx/onnx_pb.h"
#include "runtime/graph.h"
#include "runtime/op_registry.h"

namespace lockstep::onnx_export {

// One node of the Lockstep graph, as the translation sees it.
struct ExportNode {
  const NodeDef& def;
  std::vector<std::string> inputs;  // ONNX names of the node's inputs
  std::vector<TensorSpec> input_specs;
  std::vector<std::string> outputs;  // the ONNX names its outputs must take
  const std::vector<TensorSpec>& output_specs;
};

class ExportContext {
 public:
  explicit ExportContext(onnx::GraphProto& graph) : graph_(graph) {}

  // Takes `name` so that Fresh never gives it out.
  void Reserve(const std::string& name) { used_.insert(name); }
  // `base`, or `base_<k>` for the first k that is not taken yet; taken from then on.
  std::string Fresh(const std::string& base);
  // Adds a node of `op_type` writing `output`; `attrs` sets its attributes. Returns `output`.
  std::string Node(const std::string& op_type, std::vector<std::string> inputs, const std::string& output,
                   const std::function<void(onnx::NodeProto&)>& attrs = nullptr);
  // The same, writing a fresh value named after `base`.
  std::string Temp(const std::string& op_type, std::vector<std::string> inputs, const std::string& base,
                   const std::function<void(onnx::NodeProto&)>& attrs = nullptr);
  // An initializer holding `value`, named after `base`.
  std::string Initializer(const std::string& base, const Tensor& value);
  std::string Int64s(const std::string& base, const std::vector<int64_t>& values);
  std::string Float(const std::string& base, float value);
  // `value` (float32, or bfloat16 when `dtype` says so) rounded to bf16 and read back as float32:
  // what Lockstep's bf16 core multiplies. One pair of Casts per value, however many products
  // read it.
  std::string RoundedToBf16(const std::string& value, DType dtype);

 private:
  onnx::GraphProto& graph_;
  std::set<std::string> used_;
  std::map<std::string, std::string> rounded_;
};

void SetInt(onnx::NodeProto& node, const std::string& name, int64_t value);
void SetInts(onnx::NodeProto& node, const std::string& name, std::span<const int64_t> values);
void SetFloat(onnx::NodeProto& node, const std::string& name, double value);
void SetString(onnx::NodeProto& node, const std::string& name, const std::string& value);

using Translator = Status (*)(ExportContext& ctx, const ExportNode& node);
// The translation of Lockstep op `op`, or null when there is none.
const Translator* FindTranslator(std::string_view op);

// The whole export (onnx_export.h's ExportOnnxModel).
StatusOr<onnx::ModelProto> Export(const Model& model, std::string_view signature);

}  // namespace lockstep::onnx_export
