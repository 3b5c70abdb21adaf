// The op table of the ONNX importer: how one ONNX node becomes Lockstep nodes. A translator
// sees the node (op_type, attributes, the model's opset), its inputs as Lockstep values with
// what ONNX's shape inference knows of them, and which inputs are constants with what value
// (a shape, axes, pads), and emits nodes through the context. Initializers, graph inputs and
// outputs are the importer's (onnx_model.cc), not the table's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "onnx/onnx_pb.h"
#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

// A control-flow body as the importer translated it: a graph of one signature whose first
// inputs are the ONNX subgraph's own, in order, followed by one input per value it reads of
// the enclosing graphs (a weight of its own, hoisted out, or an outer value): `captures` names
// those outer values, which the node that runs the body passes as its trailing inputs.
struct OnnxBody {
  SubgraphAttr graph;
  std::vector<std::string> captures;
};

// Where translators put what they make; the importer implements it.
class OnnxGraphSink {
 public:
  virtual ~OnnxGraphSink() = default;
  // Adds a node named after `base` (made unique) and returns its output 0 as a value.
  virtual std::string AddNode(const std::string& base, const std::string& op, std::vector<std::string> inputs,
                              AttrMap attrs) = 0;
  // Adds a constant node and its weight, named after `base`.
  virtual std::string AddConstant(const std::string& base, Tensor value) = 0;
  // The value of `value` when it is a constant, else null.
  virtual const Tensor* ConstantValue(const std::string& value) const = 0;
  // For translators that recognise a pattern of several ONNX nodes ending at theirs
  // (onnx_patterns.h): the node that produces ONNX value `onnx_name` (null for a graph input or
  // an initializer), and the Lockstep value it was translated into (empty if none yet).
  virtual const onnx::NodeProto* Producer(const std::string& onnx_name) const = 0;
  virtual std::string Translated(const std::string& onnx_name) const = 0;
  // What is known of ONNX value `onnx_name`'s type (ONNX's inference completed by the
  // runtime's), once it is translated; nullopt if nothing.
  virtual std::optional<TensorSpec> TranslatedSpec(const std::string& onnx_name) const = 0;

  // Translates a subgraph (If's branches, Loop's and Scan's bodies). `input_specs`: what the
  // node knows of each of the subgraph's inputs (nullopt: nothing); where the subgraph declares
  // an input's type too, the dimensions the two disagree on are known only at run time.
  virtual StatusOr<OnnxBody> ImportBody(const onnx::GraphProto& graph,
                                        std::vector<std::optional<TensorSpec>> input_specs) = 0;
  // Translates a subgraph that takes no inputs (the branch an If with a constant condition
  // takes) into the enclosing graph itself, and returns its outputs as values of that graph.
  virtual StatusOr<std::vector<std::string>> InlineBody(const onnx::GraphProto& graph) = 0;
  // Records that the translation stopped for want of a rank or dimension known only at run
  // time: the model is then translated again per input shape (ReadOnnxModelFile).
  virtual void NoteUnknownUntilRunTime() = 0;

  // Sequences are resolved while importing: a sequence value stands for a list of tensor
  // values, known when the model loads (positions must be constants). MakeSequence returns a
  // value that stands for `elements`; SequenceOf returns the list behind a value, or null when
  // the value is a tensor.
  virtual std::string MakeSequence(std::vector<std::string> elements) = 0;
  virtual const std::vector<std::string>* SequenceOf(const std::string& value) const = 0;
};

class OnnxNodeContext {
 public:
  // `inputs`: one Lockstep value per ONNX input, "" for an omitted optional one; `specs`: what
  // ONNX's shape inference knows of each input (nullopt when it knows nothing).
  OnnxNodeContext(OnnxGraphSink& sink, const onnx::NodeProto& node, int opset, std::vector<std::string> inputs,
                  std::vector<std::optional<TensorSpec>> specs, std::string base_name);

  const onnx::NodeProto& node() const { return node_; }
  // The version of the default ONNX domain the model imports.
  int opset() const { return opset_; }
  size_t num_inputs() const { return inputs_.size(); }
  bool HasInput(size_t i) const { return i < inputs_.size() && !inputs_[i].empty(); }
  const std::string& input(size_t i) const { return inputs_[i]; }
  OnnxGraphSink& sink() const { return sink_; }
  // The value of input `i` when it is a constant, else null.
  const Tensor* ConstantInput(size_t i) const;
  // Input i's dtype and shape as ONNX inferred them (-1 for unknown dimensions).
  const std::optional<TensorSpec>& InputSpec(size_t i) const { return specs_[i]; }
  // Input i's rank, or an error saying the translation needs it.
  StatusOr<int> InputRank(size_t i) const;

  // Adds a node (name derived from the ONNX node, `suffix` distinguishing helpers) and
  // returns its output 0.
  std::string Emit(const std::string& op, std::vector<std::string> inputs, AttrMap attrs = {},
                   std::string_view suffix = "");
  std::string EmitConstant(Tensor value, std::string_view suffix = "");
  // The same node with other inputs, its emitted nodes named under `suffix`: how a translator
  // hands operands it has converted (a quantized product's float64 ones) to another.
  OnnxNodeContext WithInputs(std::vector<std::string> inputs, std::vector<std::optional<TensorSpec>> specs,
                             std::string_view suffix) const;
  // The same with another node's attributes (`node` must outlive the context): a 3-D
  // convolution's 2-D ones.
  OnnxNodeContext WithNode(const onnx::NodeProto& node, std::vector<std::string> inputs,
                           std::vector<std::optional<TensorSpec>> specs, std::string_view suffix) const;

  // Typed attributes; `fallback` when absent; an attribute of another type is an error.
  bool HasAttr(const std::string& name) const;
  StatusOr<int64_t> IntAttr(const std::string& name, int64_t fallback) const;
  StatusOr<float> FloatAttr(const std::string& name, float fallback) const;
  StatusOr<std::string> StringAttr(const std::string& name, std::string fallback) const;
  // Absent: nullopt.
  StatusOr<std::optional<std::vector<int64_t>>> IntsAttr(const std::string& name) const;
  StatusOr<const onnx::TensorProto*> TensorAttr(const std::string& name) const;
  // A subgraph attribute (a branch, a body); absent is an error.
  StatusOr<const onnx::GraphProto*> GraphAttr(const std::string& name) const;
  // Every attribute as it is, for ops whose Lockstep attrs are ONNX's (same names, int64 for
  // INT, double for FLOAT, strings, int lists): an attribute of another type is refused.
  StatusOr<AttrMap> PlainAttrs() const;
  // The integer values of constant input `i` (int32 or int64), or an error saying `what` must
  // be constant.
  StatusOr<std::vector<int64_t>> ConstantInts(size_t i, std::string_view what) const;
  // Axes from attribute `attr` (opsets before the input form) or else constant input `input`;
  // nullopt when neither is given.
  StatusOr<std::optional<std::vector<int64_t>>> AxesAttrOrInput(const std::string& attr, size_t input) const;

  // An error naming the node and its op: the model is malformed here.
  Status Error(const std::string& what) const;
  // An error naming the node and its op: valid ONNX that Lockstep does not run.
  Status Unsupported(const std::string& what) const;
  // Unsupported, for want of a shape known only at run time (OnnxGraphSink::NoteUnknownUntilRunTime).
  Status UnknownUntilRunTime(const std::string& what) const;

 private:
  const onnx::AttributeProto* FindAttr(const std::string& name) const;

  OnnxGraphSink& sink_;
  const onnx::NodeProto& node_;
  int opset_;
  std::vector<std::string> inputs_;
  std::vector<std::optional<TensorSpec>> specs_;
  std::string base_name_;
};

// Translates the current node; `outputs` receives one value per ONNX output it computes (a
// translator may leave trailing optional outputs out: the importer fails only when one of
// those is used).
using OnnxTranslator = Status (*)(OnnxNodeContext& ctx, std::vector<std::string>* outputs);

// Whether `node`'s op is one of the default domain that has a translator: if not, an error
// naming the node and the op.
Status CheckOnnxOpTranslated(const onnx::NodeProto& node);

// The translator for op `op_type` of the default domain, or null.
OnnxTranslator FindOnnxTranslator(std::string_view op_type);
// Every op the table translates, sorted.
std::vector<std::string> OnnxTranslatedOps();

}  // namespace lockstep
