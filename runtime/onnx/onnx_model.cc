#include "runtime/onnx/onnx_model.h"

#include <limits>
#include <map>
#include <set>

#include "runtime/bundle/file_image.h"
#include "runtime/graph_analysis.h"
#include "runtime/import/constants.h"
#include "runtime/onnx/onnx_checks.h"
#include "runtime/onnx/onnx_ops.h"
#include "runtime/onnx/onnx_per_input.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/op_registry.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

// model.onnx holds the weights unless they are external; protobuf refuses messages over 2 GiB.
constexpr uint64_t kMaxOnnxFileBytes = std::numeric_limits<int32_t>::max();
// Nodes whose inputs are all constants are evaluated while importing, so that translators see
// computed shapes and axes as constants, up to this many elements (larger results stay nodes).
constexpr int64_t kMaxImportFoldedElements = int64_t{1} << 16;

// What ONNX's type says of a value: its dtype and shape (-1 for a dim_param or a missing
// dimension); nullopt when the type is not a tensor of a known rank and supported dtype.
std::optional<TensorSpec> SpecOfType(const onnx::TypeProto& type) {
  if (!type.has_tensor_type()) return std::nullopt;
  const auto& tt = type.tensor_type();
  StatusOr<DType> dtype = OnnxElemTypeToDType(tt.elem_type());
  if (!dtype.ok() || !tt.has_shape() || tt.shape().dim_size() > Shape::kMaxRank) return std::nullopt;
  TensorSpec spec{ComputeDType(*dtype), Shape()};
  for (const auto& d : tt.shape().dim()) {
    spec.shape.AddDim(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : Shape::kUnknownDim);
  }
  if (!spec.shape.KnownDimsWithin()) return std::nullopt;
  return spec;
}

// What ONNX's inference says of a value, completed by what the runtime's says: ONNX's rules
// lose dimensions the runtime's keep (a Conv after a Slice of computed bounds), and a shape
// known in full lets Shape fold, and an If on a dimension take its branch, while loading.
std::optional<TensorSpec> CompletedSpec(std::optional<TensorSpec> onnx, const std::optional<TensorSpec>& runtime) {
  if (!onnx) return runtime;
  if (!runtime || runtime->shape.rank() != onnx->shape.rank()) return onnx;
  for (int d = 0; d < onnx->shape.rank(); ++d) {
    if (onnx->shape.dim(d) < 0) onnx->shape.set_dim(d, runtime->shape.dim(d));
  }
  return onnx;
}

// Node names may not hold ':' (it separates a node from its output index).
std::string SafeName(std::string_view name) {
  std::string s(name.empty() ? "node" : name);
  for (char& c : s) {
    if (c == ':') c = '_';
  }
  return s;
}

class Importer final : public OnnxGraphSink {
 public:
  // The model's main graph.
  // `pinned`: inputs whose values the graph is made for (a model made per input), which the
  // translators then see as constants.
  Importer(onnx::ModelProto& proto, const std::filesystem::path& dir,
           const std::map<std::string, const Tensor*>& pinned = {})
      : proto_(proto), graph_(&proto.graph()), dir_(dir), external_(dir), pinned_(pinned) {}
  // A subgraph of `parent`'s graph, which resolves the names the subgraph does not define.
  Importer(Importer& parent, const onnx::GraphProto& graph)
      : proto_(parent.proto_), graph_(&graph), parent_(&parent), opset_(parent.opset_), dir_(parent.dir_),
        external_(parent.dir_) {}
  StatusOr<Model> Run() &&;

  std::string AddNode(const std::string& base, const std::string& op, std::vector<std::string> inputs,
                      AttrMap attrs) override;
  std::string AddConstant(const std::string& base, Tensor value) override;
  const onnx::NodeProto* Producer(const std::string& onnx_name) const override {
    auto it = producers_.find(onnx_name);
    return it == producers_.end() ? nullptr : it->second;
  }
  std::string Translated(const std::string& onnx_name) const override {
    auto it = values_.find(onnx_name);
    return it == values_.end() ? std::string() : it->second;
  }
  std::optional<TensorSpec> TranslatedSpec(const std::string& onnx_name) const override {
    auto it = values_.find(onnx_name);
    return it == values_.end() ? std::nullopt : SpecOfValue(onnx_name, it->second);
  }
  const Tensor* ConstantValue(const std::string& value) const override {
    auto it = constants_.find(value);
    return it == constants_.end() ? nullptr : it->second;
  }
  StatusOr<OnnxBody> ImportBody(const onnx::GraphProto& graph,
                                std::vector<std::optional<TensorSpec>> input_specs) override;
  StatusOr<std::vector<std::string>> InlineBody(const onnx::GraphProto& graph) override;
  void NoteUnknownUntilRunTime() override {
    if (parent_ != nullptr) {
      parent_->NoteUnknownUntilRunTime();
    } else {
      unknown_until_run_time_ = true;
    }
  }
  bool unknown_until_run_time() const { return unknown_until_run_time_; }
  // The first node whose outputs the runtime could not size from known inputs, and why.
  const std::string& first_unsized() const { return first_unsized_; }
  std::string MakeSequence(std::vector<std::string> elements) override;
  const std::vector<std::string>* SequenceOf(const std::string& value) const override {
    auto it = sequences_.find(value);
    return it == sequences_.end() ? nullptr : &it->second;
  }

 private:
  StatusOr<int> DefaultOpset() const;
  Status CheckAndInfer();
  void CollectSpecs();
  Status AddInitializers();
  Status AddInputs(Signature& sig);
  Status AddBodyInputs(Signature& sig, const std::vector<std::optional<TensorSpec>>& input_specs);
  Status TranslateNodes();
  Status TranslateNode(const onnx::NodeProto& node);
  Status AddOutputs(Signature& sig);
  StatusOr<OnnxBody> FinishBody(Signature sig) &&;
  std::string UniqueName(const std::string& base);
  // The Lockstep value of ONNX value `onnx_name`: this graph's, or in a subgraph one captured
  // from the enclosing graphs (made an input of this one).
  StatusOr<std::string> Value(const std::string& onnx_name, const onnx::NodeProto* consumer);
  StatusOr<std::string> Capture(const std::string& onnx_name, const onnx::NodeProto* consumer);
  std::optional<TensorSpec> InferredSpec(const std::string& value) const;
  std::optional<TensorSpec> SpecOfValue(const std::string& onnx_name, const std::string& value) const;

  onnx::ModelProto& proto_;
  const onnx::GraphProto* graph_;  // the graph this importer translates
  Importer* parent_ = nullptr;     // the enclosing graph's, for a subgraph
  int opset_ = 0;
  const std::filesystem::path dir_;
  OnnxExternalData external_;
  std::map<std::string, const Tensor*> pinned_;
  Model model_;
  std::set<std::string> used_names_;
  // ONNX value name -> Lockstep value.
  std::map<std::string, std::string> values_;
  // ONNX value name -> the node that computes it.
  std::map<std::string, const onnx::NodeProto*> producers_;
  // ONNX outputs a translator did not compute -> why, for the error if something uses one.
  std::map<std::string, std::string> missing_;
  // Lockstep value -> its constant value (owned by model_.weights).
  std::map<std::string, const Tensor*> constants_;
  // ONNX value name -> what shape inference says of it.
  std::map<std::string, std::optional<TensorSpec>> specs_;
  // Lockstep node -> what the runtime's shape inference says of its outputs, where it knows
  // every input's. ONNX's inference gives up on some values its rules cannot follow (a Slice
  // with computed bounds, and whatever comes after it), where the runtime's still knows the
  // rank: translators see that instead.
  std::map<std::string, std::vector<TensorSpec>, std::less<>> inferred_;
  // A subgraph's inputs that stand for outer values: (its Input node, the outer value).
  std::vector<std::pair<std::string, std::string>> captures_;
  // The values MakeSequence made -> their elements.
  std::map<std::string, std::vector<std::string>> sequences_;
  // NoteUnknownUntilRunTime was called (on the main graph's importer).
  bool unknown_until_run_time_ = false;
  std::string first_unsized_;
};

std::optional<TensorSpec> Importer::InferredSpec(const std::string& value) const {
  // A sequence's stand-in (MakeSequence) is no tensor, and no "node:k" reference.
  StatusOr<TensorRef> ref = ParseTensorRef(value);
  if (!ref.ok()) return std::nullopt;
  auto it = inferred_.find(ref->node);
  if (it == inferred_.end() || static_cast<size_t>(ref->index) >= it->second.size()) return std::nullopt;
  return it->second[static_cast<size_t>(ref->index)];
}

std::string Importer::UniqueName(const std::string& base) {
  std::string name = SafeName(base);
  for (int i = 1; !used_names_.insert(name).second; ++i) name = SafeName(base) + "_" + std::to_string(i);
  return name;
}

std::string Importer::AddConstant(const std::string& base, Tensor value) {
  if (ComputeDType(value.dtype()) != value.dtype()) {
    // A half-precision weight is computed with in float32 (exact: float32 holds every half).
    StatusOr<Tensor> wide = CastTensor(value, ComputeDType(value.dtype()));
    if (wide.ok()) value = std::move(*wide);
  }
  const std::string name = UniqueName(base);
  auto [it, inserted] = model_.weights.insert_or_assign(name, std::move(value));
  model_.graph.nodes.push_back(NodeDef{name, std::string(kConstOp), {}, AttrMap{{"weight", name}}});
  constants_[name] = &it->second;
  inferred_[name] = {TensorSpec{it->second.dtype(), it->second.shape()}};
  return name;
}

std::string Importer::AddNode(const std::string& base, const std::string& op, std::vector<std::string> inputs,
                              AttrMap attrs) {
  // Fold a node of constants now, so that the translators after it see its value.
  const OpDef* def = OpRegistry::Global().Find(op);
  bool all_constant = def != nullptr && def->compute != nullptr && def->deterministic && def->num_outputs == 1 &&
                      !inputs.empty();
  std::vector<Tensor> values;
  int64_t elements = 0;
  for (const std::string& in : inputs) {
    const Tensor* t = all_constant ? ConstantValue(in) : nullptr;
    all_constant = t != nullptr;
    if (t != nullptr) {
      values.push_back(*t);
      elements += t->num_elements();
    }
  }
  if (all_constant && elements <= kMaxImportFoldedElements) {
    StatusOr<Tensor> result = EvaluateConstantOp(*def, values, attrs, ThreadPool::Default(), kMaxImportFoldedElements);
    if (result.ok()) return AddConstant(base, std::move(*result));
  }
  const std::string name = UniqueName(base);
  if (def != nullptr && def->infer != nullptr) {
    std::vector<TensorSpec> specs;
    std::vector<const Tensor*> constant_values;
    for (const std::string& in : inputs) {
      std::optional<TensorSpec> spec = InferredSpec(in);
      if (!spec) break;
      specs.push_back(std::move(*spec));
      constant_values.push_back(ConstantValue(in));
    }
    if (specs.size() == inputs.size()) {
      StatusOr<std::vector<TensorSpec>> out = def->infer(ShapeInferenceContext{specs, attrs, constant_values});
      if (out.ok()) {
        inferred_[name] = std::move(*out);
      } else if (first_unsized_.empty()) {
        first_unsized_ = "node '" + name + "' (" + op + "): " + out.status().message();
      }
    }
  }
  model_.graph.nodes.push_back(NodeDef{name, op, std::move(inputs), std::move(attrs)});
  return name;
}

StatusOr<int> Importer::DefaultOpset() const {
  int opset = -1;
  for (const auto& o : proto_.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  }
  if (opset < 0) return InvalidArgument("the model imports no opset of the default ONNX domain");
  if (opset < kMinOnnxOpset || opset > kMaxOnnxOpset) {
    return Unimplemented("the model uses opset " + std::to_string(opset) + "; Lockstep reads opsets " +
                         std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset));
  }
  return opset;
}

Status Importer::CheckAndInfer() {
  LS_RETURN_IF_ERROR(CheckAndInferOnnxShapes(proto_, dir_));
  LS_RETURN_IF_ERROR(RefuseComputedFourBitValues(*graph_));
  CollectSpecs();
  return Status::Ok();
}

void Importer::CollectSpecs() {
  for (const auto& list : {&graph_->input(), &graph_->value_info(), &graph_->output()}) {
    for (const onnx::ValueInfoProto& vi : *list) specs_[vi.name()] = SpecOfType(vi.type());
  }
}

Status Importer::AddInitializers() {
  const onnx::GraphProto& g = *graph_;
  if (g.sparse_initializer_size() > 0) return Unimplemented("sparse initializers are not supported");
  for (const onnx::TensorProto& init : g.initializer()) {
    StatusOr<Tensor> value = TensorFromOnnx(init, &external_);
    if (!value.ok()) return value.status().WithPrefix("initializer '" + init.name() + "'");
    values_[init.name()] = AddConstant(init.name(), std::move(*value));
  }
  return Status::Ok();
}

Status Importer::AddInputs(Signature& sig) {
  for (const onnx::ValueInfoProto& vi : proto_.graph().input()) {
    if (values_.count(vi.name()) > 0) continue;  // an initializer listed as an input: a constant
    const std::string what = "input '" + vi.name() + "'";
    if (!vi.type().has_tensor_type()) return Unimplemented(what + " is not a tensor");
    StatusOr<DType> dtype = OnnxElemTypeToDType(vi.type().tensor_type().elem_type());
    if (!dtype.ok()) return dtype.status().WithPrefix(what);
    const std::optional<TensorSpec>& spec = specs_[vi.name()];
    if (!spec) {
      NoteUnknownUntilRunTime();
      return Unimplemented(what + " has no shape (its rank must be known)");
    }
    const std::string name = UniqueName(vi.name());
    model_.graph.nodes.push_back(
        NodeDef{name, std::string(kInputOp), {}, AttrMap{{"dtype", *dtype}, {"shape", spec->shape}}});
    values_[vi.name()] = name;
    inferred_[name] = {TensorSpec{*dtype, spec->shape}};
    if (auto pinned = pinned_.find(vi.name()); pinned != pinned_.end()) {
      // A copy: the graph outlives the run whose input it was made for.
      values_[vi.name()] = AddConstant(vi.name() + "/pinned", pinned->second->Clone());
    } else if (ComputeDType(*dtype) != *dtype) {
      // A half-precision input, widened on the way in.
      values_[vi.name()] = AddNode(name + "/wide", "Cast", {name}, AttrMap{{"dtype", ComputeDType(*dtype)}});
    }
    sig.inputs.push_back(TensorBinding{vi.name(), name, *dtype, spec->shape});
  }
  return Status::Ok();
}

StatusOr<std::string> Importer::Value(const std::string& onnx_name, const onnx::NodeProto* consumer) {
  auto it = values_.find(onnx_name);
  if (it != values_.end()) return it->second;
  if (parent_ != nullptr && missing_.count(onnx_name) == 0) return Capture(onnx_name, consumer);
  const std::string who = consumer == nullptr ? "the graph's outputs"
                                              : "node '" + consumer->name() + "' (" + consumer->op_type() + ")";
  auto missing = missing_.find(onnx_name);
  if (missing != missing_.end()) return Unimplemented(who + " uses '" + onnx_name + "', " + missing->second);
  return InvalidArgument(who + " uses '" + onnx_name + "', which no node, input or initializer produces");
}

Status Importer::TranslateNodes() {
  for (const onnx::NodeProto& node : graph_->node()) {
    for (const std::string& out : node.output()) producers_[out] = &node;
  }
  for (const onnx::NodeProto& node : graph_->node()) LS_RETURN_IF_ERROR(TranslateNode(node));
  return Status::Ok();
}

// The ops that take a sequence (onnx_sequence_ops.cc); any other given one is refused.
bool TakesSequence(const std::string& op_type) {
  return op_type == "SequenceInsert" || op_type == "SequenceAt" || op_type == "SequenceLength" ||
         op_type == "SequenceErase" || op_type == "ConcatFromSequence";
}

Status Importer::TranslateNode(const onnx::NodeProto& node) {
  const std::string label = "node '" + node.name() + "' (" + node.op_type() + ")";
  LS_RETURN_IF_ERROR(CheckOnnxOpTranslated(node));
  OnnxTranslator translator = FindOnnxTranslator(node.op_type());
  std::vector<std::string> inputs;
  std::vector<std::optional<TensorSpec>> specs;
  for (const std::string& in : node.input()) {
    if (in.empty()) {
      inputs.emplace_back();
      specs.emplace_back();
      continue;
    }
    LS_ASSIGN_OR_RETURN(std::string value, Value(in, &node));
    if (SequenceOf(value) != nullptr && !TakesSequence(node.op_type())) {
      if (node.op_type() == "Identity" && node.output_size() == 1) {
        values_[node.output(0)] = value;
        return Status::Ok();
      }
      return Unimplemented(label + ": input '" + in + "' is a sequence, which Lockstep resolves while loading " +
                           "for the Sequence ops alone");
    }
    inputs.push_back(std::move(value));
    auto spec = specs_.find(in);
    specs.push_back(spec == specs_.end() ? std::nullopt : spec->second);
    // An initializer's shape is its own, whatever value_info says.
    if (const Tensor* c = ConstantValue(inputs.back())) specs.back() = TensorSpec{c->dtype(), c->shape()};
    specs.back() = CompletedSpec(specs.back(), InferredSpec(inputs.back()));
  }
  const std::string base = !node.name().empty() ? node.name() : node.output_size() > 0 ? node.output(0) : node.op_type();
  OnnxNodeContext ctx(*this, node, opset_, std::move(inputs), std::move(specs), base);
  std::vector<std::string> outputs;
  LS_RETURN_IF_ERROR(translator(ctx, &outputs));
  for (int k = 0; k < node.output_size(); ++k) {
    const std::string& name = node.output(k);
    if (name.empty()) continue;
    if (static_cast<size_t>(k) < outputs.size()) {
      values_[name] = outputs[static_cast<size_t>(k)];
    } else {
      missing_[name] = "output " + std::to_string(k) + " of " + label + ", which Lockstep does not compute";
    }
  }
  return Status::Ok();
}

Status Importer::AddOutputs(Signature& sig) {
  std::set<std::string> unranked;
  for (const onnx::ValueInfoProto& vi : graph_->output()) {
    LS_ASSIGN_OR_RETURN(std::string value, Value(vi.name(), nullptr));
    // A signature output must be computed by a node of its own.
    const NodeDef* producer = model_.graph.FindNode(value);
    if (producer != nullptr && (producer->op == kInputOp || producer->op == kConstOp)) {
      value = UniqueName(vi.name() + "/identity");
      model_.graph.nodes.push_back(NodeDef{value, "Identity", {values_[vi.name()]}, {}});
    }
    const std::string what = "output '" + vi.name() + "'";
    if (!vi.type().has_tensor_type()) return Unimplemented(what + " is not a tensor");
    StatusOr<DType> dtype = OnnxElemTypeToDType(vi.type().tensor_type().elem_type());
    if (!dtype.ok()) return dtype.status().WithPrefix(what);
    // A body's values stay as they are computed, in float32: its node's outputs are narrowed,
    // if ever, on their way out of the main graph.
    if (parent_ != nullptr) *dtype = ComputeDType(*dtype);
    if (ComputeDType(*dtype) != *dtype) {
      // A half-precision output, narrowed (rounded) on the way out.
      value = UniqueName(vi.name() + "/narrow");
      model_.graph.nodes.push_back(NodeDef{value, "Cast", {values_[vi.name()]}, AttrMap{{"dtype", *dtype}}});
    }
    TensorBinding binding{parent_ != nullptr ? std::to_string(sig.outputs.size()) : vi.name(), value, *dtype, Shape()};
    const std::optional<TensorSpec>& spec = specs_[vi.name()];
    if (spec) {
      binding.shape = spec->shape;
    } else {
      unranked.insert(binding.key);
    }
    sig.outputs.push_back(std::move(binding));
  }
  if (unranked.empty()) return Status::Ok();
  // Outputs ONNX gave no shape take the one the runtime infers.
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeNodes(model_));
  for (TensorBinding& b : sig.outputs) {
    if (unranked.count(b.key) == 0) continue;
    LS_ASSIGN_OR_RETURN(ValueId v, a.Resolve(b.tensor));
    b.shape = a.Spec(v).shape;
  }
  return Status::Ok();
}

StatusOr<std::string> Importer::Capture(const std::string& onnx_name, const onnx::NodeProto* consumer) {
  LS_ASSIGN_OR_RETURN(std::string outer, parent_->Value(onnx_name, consumer));
  if (parent_->SequenceOf(outer) != nullptr) {
    return Unimplemented("a subgraph reads sequence '" + onnx_name + "' of the enclosing graph; Lockstep resolves " +
                         "sequences while loading, outside control flow");
  }
  std::string local;
  if (const Tensor* c = parent_->ConstantValue(outer)) {
    // The translators in here see it as the constant it is; it is hoisted out again at the end.
    local = AddConstant(onnx_name, *c);
  } else {
    std::optional<TensorSpec> spec = parent_->SpecOfValue(onnx_name, outer);
    if (!spec) {
      NoteUnknownUntilRunTime();
      return Unimplemented("a subgraph reads '" + onnx_name + "' of the enclosing graph, whose rank is not known");
    }
    local = UniqueName(onnx_name);
    model_.graph.nodes.push_back(
        NodeDef{local, std::string(kInputOp), {}, AttrMap{{"dtype", spec->dtype}, {"shape", spec->shape}}});
    inferred_[local] = {*spec};
    captures_.emplace_back(local, outer);
  }
  values_[onnx_name] = local;
  return local;
}

std::optional<TensorSpec> Importer::SpecOfValue(const std::string& onnx_name, const std::string& value) const {
  if (const Tensor* c = ConstantValue(value)) return TensorSpec{c->dtype(), c->shape()};
  auto it = specs_.find(onnx_name);
  return CompletedSpec(it != specs_.end() ? it->second : std::nullopt, InferredSpec(value));
}

std::string Importer::MakeSequence(std::vector<std::string> elements) {
  // Neither a node's name (those hold no ':') nor one of its outputs ("node:1"), so it stands
  // for no tensor, and a sequence that reached a node would fail to resolve.
  std::string value = "sequence:#" + std::to_string(sequences_.size());
  sequences_.emplace(value, std::move(elements));
  return value;
}

StatusOr<OnnxBody> Importer::ImportBody(const onnx::GraphProto& graph,
                                        std::vector<std::optional<TensorSpec>> input_specs) {
  Importer body(*this, graph);
  body.CollectSpecs();
  LS_RETURN_IF_ERROR(body.AddInitializers());
  Signature sig;
  sig.name = "body";
  LS_RETURN_IF_ERROR(body.AddBodyInputs(sig, input_specs));
  LS_RETURN_IF_ERROR(body.TranslateNodes());
  LS_RETURN_IF_ERROR(body.AddOutputs(sig));
  return std::move(body).FinishBody(std::move(sig));
}

StatusOr<std::vector<std::string>> Importer::InlineBody(const onnx::GraphProto& graph) {
  if (graph.input_size() > 0) return InvalidArgument("a subgraph with inputs cannot be inlined");
  const onnx::GraphProto* enclosing = graph_;
  graph_ = &graph;
  // ONNX names are unique across a model's graphs, so the branch's values join this graph's.
  CollectSpecs();
  Status translated = AddInitializers();
  if (translated.ok()) translated = TranslateNodes();
  graph_ = enclosing;
  LS_RETURN_IF_ERROR(translated);
  std::vector<std::string> outputs;
  for (const onnx::ValueInfoProto& vi : graph.output()) {
    LS_ASSIGN_OR_RETURN(std::string value, Value(vi.name(), nullptr));
    outputs.push_back(std::move(value));
  }
  return outputs;
}

Status Importer::AddBodyInputs(Signature& sig, const std::vector<std::optional<TensorSpec>>& input_specs) {
  for (int i = 0; i < graph_->input_size(); ++i) {
    const onnx::ValueInfoProto& vi = graph_->input(i);
    std::optional<TensorSpec> spec = specs_[vi.name()];
    const std::optional<TensorSpec> given =
        static_cast<size_t>(i) < input_specs.size() ? input_specs[static_cast<size_t>(i)] : std::nullopt;
    if (!spec) {
      spec = given;
    } else if (given && given->shape.rank() == spec->shape.rank()) {
      for (int d = 0; d < spec->shape.rank(); ++d) {
        if (spec->shape.dim(d) != given->shape.dim(d)) spec->shape.set_dim(d, Shape::kUnknownDim);
      }
    }
    if (!spec) {
      NoteUnknownUntilRunTime();
      return Unimplemented("subgraph input '" + vi.name() + "' has no shape (its rank must be known)");
    }
    const std::string name = UniqueName(vi.name());
    model_.graph.nodes.push_back(
        NodeDef{name, std::string(kInputOp), {}, AttrMap{{"dtype", spec->dtype}, {"shape", spec->shape}}});
    values_[vi.name()] = name;
    inferred_[name] = {*spec};
    sig.inputs.push_back(TensorBinding{std::to_string(i), name, spec->dtype, spec->shape});
  }
  return Status::Ok();
}

// The body's constants become inputs, their weights constants of the enclosing graph, so
// that the body is a function of its inputs alone (attr.h's SubgraphAttr).
StatusOr<OnnxBody> Importer::FinishBody(Signature sig) && {
  OnnxBody body;
  for (NodeDef& node : model_.graph.nodes) {
    if (node.op != kConstOp) continue;
    const Tensor& weight = model_.weights.at(std::get<std::string>(node.attrs.values().at("weight")));
    node.op = std::string(kInputOp);
    node.attrs = AttrMap{{"dtype", weight.dtype()}, {"shape", weight.shape()}};
    sig.inputs.push_back(TensorBinding{std::to_string(sig.inputs.size()), node.name, weight.dtype(), weight.shape()});
    body.captures.push_back(parent_->AddConstant(node.name, weight));
  }
  for (const auto& [input, outer] : captures_) {
    const TensorSpec spec = *InferredSpec(input);
    sig.inputs.push_back(TensorBinding{std::to_string(sig.inputs.size()), input, spec.dtype, spec.shape});
    body.captures.push_back(outer);
  }
  model_.graph.signatures.push_back(std::move(sig));
  body.graph = std::make_shared<const Graph>(std::move(model_.graph));
  return body;
}

StatusOr<Model> Importer::Run() && {
  LS_ASSIGN_OR_RETURN(opset_, DefaultOpset());
  const int opset = opset_;
  LS_RETURN_IF_ERROR(CheckAndInfer());
  LS_RETURN_IF_ERROR(AddInitializers());
  Signature sig;
  sig.name = std::string(kDefaultSignature);
  sig.method_name = "tensorflow/serving/predict";
  LS_RETURN_IF_ERROR(AddInputs(sig));
  LS_RETURN_IF_ERROR(TranslateNodes());
  LS_RETURN_IF_ERROR(AddOutputs(sig));
  model_.graph.signatures.push_back(std::move(sig));
  model_.graph.metadata["format"] = "onnx";
  model_.graph.metadata["onnx_opset"] = std::to_string(opset);
  model_.graph.metadata["onnx_ir_version"] = std::to_string(proto_.ir_version());
  if (!proto_.producer_name().empty()) {
    model_.graph.metadata["onnx_producer"] = proto_.producer_name() + " " + proto_.producer_version();
  }
  return std::move(model_);
}

}  // namespace

bool IsOnnxModelDir(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / kOnnxModelFile, ec);
}

StatusOr<Model> ImportOnnxModel(onnx::ModelProto& model, const std::filesystem::path& dir) {
  return ImportOnnxModelFor(model, dir, {}, nullptr);
}

StatusOr<Model> ImportOnnxModelFor(onnx::ModelProto& model, const std::filesystem::path& dir,
                                   const std::map<std::string, const Tensor*>& pinned, bool* unknown_until_run_time) {
  try {
    Importer importer(model, dir, pinned);
    StatusOr<Model> imported = std::move(importer).Run();
    if (imported.ok() || !importer.unknown_until_run_time()) return imported;
    if (unknown_until_run_time != nullptr) *unknown_until_run_time = true;
    // A shape is unknown because a node before could not be sized: that node is the cause.
    if (importer.first_unsized().empty()) return imported;
    return Status(imported.status().code(), importer.first_unsized() + "; then " + imported.status().message());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while importing the model");
  } catch (const std::exception& e) {
    return Internal(std::string("importing the model: ") + e.what());
  }
}

StatusOr<Model> ReadOnnxModel(const std::filesystem::path& dir) { return ReadOnnxModelFile(dir / kOnnxModelFile); }

StatusOr<Model> ReadOnnxModelFile(const std::filesystem::path& file) {
  StatusOr<std::shared_ptr<const FileImage>> image = FileImage::Read(file, kMaxOnnxFileBytes);
  if (!image.ok()) return image.status().WithPrefix(file.string());
  onnx::ModelProto proto;
  if (!proto.ParseFromArray((*image)->data(), static_cast<int>((*image)->size()))) {
    return InvalidArgument(file.string() + ": not an ONNX ModelProto (corrupted or truncated)");
  }
  bool unknown_until_run_time = false;
  StatusOr<Model> model = ImportOnnxModelFor(proto, file.parent_path(), {}, &unknown_until_run_time);
  if (!model.ok() && unknown_until_run_time) {
    // Ranks or dimensions known only at run time: the graph is made per input instead.
    StatusOr<Model> per_input = OnnxModelPerInput(*image, file.parent_path());
    if (!per_input.ok()) return per_input.status().WithPrefix(file.string());
    return per_input;
  }
  if (!model.ok()) return model.status().WithPrefix(file.string());
  return model;
}

}  // namespace lockstep
