#include "runtime/saved_model/saved_model.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "runtime/base64.h"
#include "runtime/bundle/bundle.h"
#include "runtime/bundle/file_image.h"
#include "runtime/graph_analysis.h"
#include "runtime/op_registry.h"
#include "runtime/saved_model/checkpoint.h"
#include "runtime/saved_model/flat_graph.h"
#include "runtime/saved_model/tensor_proto.h"
#include "runtime/saved_model/tf_ops.h"
#include "tensorflow/core/protobuf/saved_model.pb.h"

namespace lockstep {
namespace {

// saved_model.pb files of real models are kilobytes to megabytes (the weights are in the
// checkpoint); protobuf itself refuses messages over 2 GiB.
constexpr uint64_t kMaxSavedModelBytes = uint64_t{1} << 30;

bool IsVariableOp(std::string_view op) {
  return op == "VariableV2" || op == "Variable" || op == "VarHandleOp";
}
// Variables are read through these; the importer passes the variable's value on.
bool IsVariableReadOp(std::string_view op) {
  return op == "ReadVariableOp";
}

// Which checkpoint key holds each variable: the graph's restore ops say so. A restore is an
// Assign (TF1) or AssignVariableOp (resource variables, TF2) of output k of a RestoreV2 node,
// perhaps through Identity, and RestoreV2's input 1 is the constant list of keys. Variables no
// restore op names keep their own name as key (TF1 savers name variables so).
std::map<std::string, std::string> CheckpointKeys(const FlatGraph& graph) {
  std::map<std::string, std::string> keys;
  std::vector<const FlatNode*> assigns;
  graph.ForEachNode([&](const FlatNode& node) {
    if (node.def->op() == "Assign" || node.def->op() == "AssignVariableOp") assigns.push_back(&node);
  });
  for (const FlatNode* assign : assigns) {
    if (assign->inputs.size() < 2) continue;
    StatusOr<FlatRef> var = graph.Resolve(assign->inputs[0]);
    StatusOr<FlatRef> value = graph.Resolve(assign->inputs[1]);
    if (!var.ok() || !value.ok()) continue;
    const FlatNode* var_node = graph.Find(var->node);
    if (var_node == nullptr || !IsVariableOp(var_node->def->op())) continue;
    const FlatNode* v = graph.Find(value->node);
    int index = value->index;
    for (int hops = 0; v != nullptr && v->def->op() == "Identity" && !v->inputs.empty() && hops < 16;
         ++hops) {
      StatusOr<FlatRef> next = graph.Resolve(v->inputs[0]);
      if (!next.ok()) break;
      v = graph.Find(next->node);
      index = next->index;
    }
    if (v == nullptr || v->def->op() != "RestoreV2" || v->inputs.size() < 2) continue;
    StatusOr<FlatRef> names_ref = graph.Resolve(v->inputs[1]);
    if (!names_ref.ok()) continue;
    const FlatNode* names = graph.Find(names_ref->node);
    if (names == nullptr || names->def->op() != "Const") continue;
    auto value_attr = names->def->attr().find("value");
    if (value_attr == names->def->attr().end()) continue;
    const tensorflow::TensorProto& list = value_attr->second.tensor();
    if (index < 0 || index >= list.string_val_size()) continue;
    keys[var_node->name] = list.string_val(index);
  }
  return keys;
}

// The translation state of one model: emitted nodes, weights, and what was already translated
// under which feeding, so that signatures share every node whose value they share.
class Importer {
 public:
  Importer(const FlatGraph& graph, const Checkpoint* checkpoint, std::map<std::string, std::string> keys)
      : graph_(graph), checkpoint_(checkpoint), checkpoint_keys_(std::move(keys)) {}

  Status AddSignature(const std::string& name, const tensorflow::SignatureDef& def);
  // The model, with the shapes of outputs declared without a rank filled in from the graph.
  StatusOr<Model> Finish() &&;

 private:
  // A translated node: its outputs as Lockstep values, and the fed nodes its value depends on
  // (sorted), which tell whether another signature may share it.
  struct Translated {
    std::vector<std::string> outputs;
    std::vector<std::string> feeds;
  };
  class NodeContext;

  StatusOr<const Translated*> Translate(const std::string& node,
                                        const std::map<std::string, TensorBinding>& fed,
                                        const std::string& signature);
  StatusOr<Translated> TranslateOne(const FlatNode& node, const std::vector<const Translated*>& inputs,
                                    const std::vector<int>& input_indices, const std::string& emitted_name);
  std::string UniqueName(const std::string& tf_name, const std::string& signature);
  StatusOr<TensorBinding> Binding(const std::string& key, const tensorflow::TensorInfo& info, bool is_input);

  const FlatGraph& graph_;
  const Checkpoint* checkpoint_;
  const std::map<std::string, std::string> checkpoint_keys_;
  Model model_;
  std::set<std::string> used_names_;
  // "<tf node>|<feeds>" -> its translation.
  std::map<std::string, Translated> translated_;
  // Lockstep value -> its constant value, for translators that need one (a shape, an axis).
  std::map<std::string, const Tensor*> constants_;
  // (signature, output key) of outputs declared without a rank.
  std::set<std::pair<std::string, std::string>> unranked_outputs_;
  std::string current_signature_;
};

class Importer::NodeContext final : public TranslationContext {
 public:
  NodeContext(Importer& importer, const FlatNode& node, std::string name, std::vector<std::string> inputs)
      : importer_(importer), node_(node), name_(std::move(name)), inputs_(std::move(inputs)) {}
  const tensorflow::NodeDef& node() const override { return *node_.def; }
  const std::string& name() const override { return name_; }
  const std::vector<std::string>& inputs() const override { return inputs_; }
  const Tensor* ConstantInput(size_t i) const override {
    if (i >= inputs_.size()) return nullptr;
    auto it = importer_.constants_.find(inputs_[i]);
    return it == importer_.constants_.end() ? nullptr : it->second;
  }
  std::string Emit(const std::string& op, std::vector<std::string> inputs, AttrMap attrs,
                   std::string_view suffix) override {
    std::string name = NodeName(suffix);
    importer_.model_.graph.nodes.push_back({name, op, std::move(inputs), std::move(attrs)});
    return name + ":0";
  }
  std::string EmitConstant(Tensor value, std::string_view suffix) override {
    std::string name = NodeName(suffix);
    auto [weight, inserted] = importer_.model_.weights.insert_or_assign(name, std::move(value));
    (void)inserted;
    importer_.model_.graph.nodes.push_back({name, std::string(kConstOp), {}, AttrMap{{"weight", name}}});
    importer_.constants_[name + ":0"] = &weight->second;
    return name + ":0";
  }

 private:
  std::string NodeName(std::string_view suffix) {
    if (suffix.empty()) return name_;
    std::string name = name_ + "/" + std::string(suffix);
    importer_.used_names_.insert(name);
    return name;
  }
  Importer& importer_;
  const FlatNode& node_;
  std::string name_;
  std::vector<std::string> inputs_;
};

std::string Importer::UniqueName(const std::string& tf_name, const std::string& signature) {
  std::string name = tf_name;
  if (used_names_.count(name) != 0) name = signature + "/" + tf_name;
  for (int n = 1; used_names_.count(name) != 0; ++n)
    name = signature + "/" + tf_name + "_" + std::to_string(n);
  used_names_.insert(name);
  return name;
}

StatusOr<TensorBinding> Importer::Binding(const std::string& key, const tensorflow::TensorInfo& info,
                                          bool is_input) {
  TensorBinding b;
  b.key = key;
  b.any_shape = is_input;  // as TensorFlow feeds (saved_model.h)
  StatusOr<DType> dtype = DataTypeToDType(info.dtype());
  if (!dtype.ok()) return InvalidArgument("'" + key + "': " + dtype.status().message());
  b.dtype = *dtype;
  // No shape at all is what early exports write for "unknown" (as an empty Placeholder shape
  // once meant unconstrained).
  if (!info.has_tensor_shape() || info.tensor_shape().unknown_rank()) {
    // An input of any rank: the graph is built for a batch of elements ([-1]), the shape
    // ParseExample takes its serialized examples in. An output: whatever the graph computes
    // (Finish fills it in).
    b.shape = Shape{-1};
    if (!is_input) unranked_outputs_.insert({current_signature_, key});
    return b;
  }
  std::vector<int64_t> dims;
  for (const auto& d : info.tensor_shape().dim()) dims.push_back(d.size() < 0 ? -1 : d.size());
  // The caller chooses the first dimension (see saved_model.h).
  if (!dims.empty()) dims[0] = -1;
  StatusOr<Shape> shape = Shape::FromDims(dims);
  if (!shape.ok()) return InvalidArgument("'" + key + "': " + shape.status().message());
  b.shape = *shape;
  return b;
}

Status Importer::AddSignature(const std::string& name, const tensorflow::SignatureDef& def) {
  auto context = [&](const Status& s) { return s.WithPrefix("signature '" + name + "'"); };
  current_signature_ = name;
  Signature sig;
  sig.name = name;
  sig.method_name = def.method_name();
  // Inputs: the nodes they feed. Keys in sorted order (the proto map has none).
  std::map<std::string, TensorBinding> fed;  // fed node -> binding (tensor to be set)
  std::vector<std::string> fed_in_key_order;
  std::map<std::string, tensorflow::TensorInfo> inputs(def.inputs().begin(), def.inputs().end());
  for (const auto& [key, info] : inputs) {
    StatusOr<TensorBinding> b = Binding(key, info, true);
    if (!b.ok()) return context(b.status());
    StatusOr<FlatRef> ref = graph_.ResolveName(info.name());
    if (!ref.ok()) return context(ref.status().WithPrefix("input '" + key + "'"));
    if (ref->index != 0) {
      return context(InvalidArgument("input '" + key + "' feeds output " + std::to_string(ref->index) +
                                     " of node '" + ref->node + "'; only a node's first output can be fed"));
    }
    // TensorFlow feeds a placeholder by name and holds the feed to the placeholder's own dtype,
    // whatever the SignatureDef says (half_plus_three's declares its serialized examples as
    // floats); the node is the truth.
    if (const FlatNode* fed_node = graph_.Find(ref->node); fed_node != nullptr) {
      auto dtype_attr = fed_node->def->attr().find("dtype");
      if (dtype_attr != fed_node->def->attr().end() &&
          dtype_attr->second.value_case() == tensorflow::AttrValue::kType) {
        StatusOr<DType> dtype = DataTypeToDType(dtype_attr->second.type());
        if (!dtype.ok()) return context(dtype.status().WithPrefix("input '" + key + "'"));
        b->dtype = *dtype;
      }
      // With no rank declared, the placeholder's own shape builds the graph where it has one
      // (rank 0 excepted: early exports wrote that for "unconstrained").
      auto shape_attr = fed_node->def->attr().find("shape");
      if ((!info.has_tensor_shape() || info.tensor_shape().unknown_rank()) && shape_attr != fed_node->def->attr().end() &&
          shape_attr->second.has_shape() && !shape_attr->second.shape().unknown_rank() &&
          shape_attr->second.shape().dim_size() >= 1) {
        std::vector<int64_t> dims;
        for (const auto& d : shape_attr->second.shape().dim()) dims.push_back(d.size() < 0 ? -1 : d.size());
        dims[0] = -1;  // the caller's, as for declared shapes
        StatusOr<Shape> shape = Shape::FromDims(dims);
        if (!shape.ok()) return context(shape.status().WithPrefix("input '" + key + "'"));
        b->shape = *shape;
      }
    }
    if (fed.count(ref->node) != 0) {
      return context(
          InvalidArgument("inputs '" + fed[ref->node].key + "' and '" + key + "' feed the same tensor"));
    }
    fed[ref->node] = *b;
    fed_in_key_order.push_back(ref->node);
  }
  std::map<std::string, tensorflow::TensorInfo> outputs(def.outputs().begin(), def.outputs().end());
  if (outputs.empty()) return context(InvalidArgument("no outputs"));
  for (const auto& [key, info] : outputs) {
    StatusOr<TensorBinding> b = Binding(key, info, false);
    if (!b.ok()) return context(b.status());
    StatusOr<FlatRef> ref = graph_.ResolveName(info.name());
    if (!ref.ok()) return context(ref.status().WithPrefix("output '" + key + "'"));
    StatusOr<const Translated*> t = Translate(ref->node, fed, name);
    if (!t.ok()) return context(t.status().WithPrefix("output '" + key + "'"));
    if (ref->index >= static_cast<int>((*t)->outputs.size())) {
      return context(InvalidArgument("output '" + key + "': tensor " + info.name() + " does not exist"));
    }
    b->tensor = (*t)->outputs[ref->index];
    sig.outputs.push_back(*b);
  }
  // The inputs' nodes, translated by now unless no output depends on them.
  for (const std::string& node : fed_in_key_order) {
    StatusOr<const Translated*> t = Translate(node, fed, name);
    if (!t.ok()) return context(t.status());
    TensorBinding b = fed.at(node);
    b.tensor = (*t)->outputs[0];
    sig.inputs.push_back(b);
  }
  model_.graph.signatures.push_back(std::move(sig));
  return Status::Ok();
}

StatusOr<Model> Importer::Finish() && {
  if (!unranked_outputs_.empty()) {
    LS_ASSIGN_OR_RETURN(GraphAnalysis analysis, AnalyzeNodes(model_));
    for (Signature& sig : model_.graph.signatures) {
      for (TensorBinding& b : sig.outputs) {
        if (unranked_outputs_.count({sig.name, b.key}) == 0) continue;
        LS_ASSIGN_OR_RETURN(ValueId v, analysis.Resolve(b.tensor));
        b.shape = analysis.Spec(v).shape;
      }
    }
  }
  return std::move(model_);
}

StatusOr<const Importer::Translated*> Importer::Translate(const std::string& root,
                                                          const std::map<std::string, TensorBinding>& fed,
                                                          const std::string& signature) {
  // Iterative depth-first walk (a deep graph must not exhaust the stack): a node is translated
  // once all of its inputs are.
  std::map<std::string, const Translated*> done;  // this signature's view
  std::set<std::string> on_path;
  std::vector<std::pair<std::string, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [name, expanded] = stack.back();
    stack.pop_back();
    if (done.count(name) != 0) continue;
    const FlatNode* node = graph_.Find(name);
    if (node == nullptr) return NotFound("no node '" + name + "'");
    const bool is_fed = fed.count(name) != 0;
    std::vector<FlatRef> inputs;
    if (!is_fed) {
      for (const FlatRef& in : node->inputs) {
        LS_ASSIGN_OR_RETURN(FlatRef r, graph_.Resolve(in));
        inputs.push_back(std::move(r));
      }
    }
    if (!expanded) {
      if (on_path.count(name) != 0) return InvalidArgument("node '" + name + "' is part of a cycle");
      on_path.insert(name);
      stack.push_back({name, true});
      for (const FlatRef& in : inputs) {
        if (done.count(in.node) == 0) stack.push_back({in.node, false});
      }
      continue;
    }
    on_path.erase(name);
    std::vector<const Translated*> input_translations;
    std::vector<int> input_indices;
    std::set<std::string> feeds;
    for (const FlatRef& in : inputs) {
      auto it = done.find(in.node);
      if (it == done.end()) return InvalidArgument("node '" + in.node + "' is part of a cycle");
      input_translations.push_back(it->second);
      input_indices.push_back(in.index);
      feeds.insert(it->second->feeds.begin(), it->second->feeds.end());
    }
    if (is_fed) feeds.insert(name);
    std::string memo_key = name + "|";
    for (const std::string& f : feeds) memo_key += f + ",";
    auto memo = translated_.find(memo_key);
    if (memo == translated_.end()) {
      const std::string emitted = UniqueName(name, signature);
      Translated t;
      if (is_fed) {
        const TensorBinding& b = fed.at(name);
        model_.graph.nodes.push_back(
            {emitted, std::string(kInputOp), {}, AttrMap{{"dtype", b.dtype}, {"shape", b.shape}}});
        t.outputs.push_back(emitted + ":0");
      } else {
        StatusOr<Translated> r = TranslateOne(*node, input_translations, input_indices, emitted);
        if (!r.ok()) return r.status();
        t = std::move(*r);
      }
      t.feeds.assign(feeds.begin(), feeds.end());
      memo = translated_.emplace(memo_key, std::move(t)).first;
    }
    done[name] = &memo->second;
  }
  return done.at(root);
}

StatusOr<Importer::Translated> Importer::TranslateOne(const FlatNode& node,
                                                      const std::vector<const Translated*>& inputs,
                                                      const std::vector<int>& input_indices,
                                                      const std::string& emitted) {
  const std::string& op = node.def->op();
  auto error = [&](const std::string& what) {
    return InvalidArgument("node '" + node.name + "' (op " + op + "): " + what);
  };
  std::vector<std::string> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (input_indices[i] >= static_cast<int>(inputs[i]->outputs.size())) {
      return error("input " + std::to_string(i) + " refers to output " + std::to_string(input_indices[i]) +
                   ", which its node does not have");
    }
    values.push_back(inputs[i]->outputs[input_indices[i]]);
  }
  Translated t;
  if (IsVariableOp(op)) {
    if (checkpoint_ == nullptr) return error("the SavedModel has no variables checkpoint");
    std::string key = node.name;
    if (auto it = checkpoint_keys_.find(node.name); it != checkpoint_keys_.end()) key = it->second;
    LS_ASSIGN_OR_RETURN(Tensor value, checkpoint_->Read(key));
    auto [weight, inserted] = model_.weights.insert_or_assign(emitted, std::move(value));
    (void)inserted;
    model_.graph.nodes.push_back({emitted, std::string(kConstOp), {}, AttrMap{{"weight", emitted}}});
    constants_[emitted + ":0"] = &weight->second;
    t.outputs.push_back(emitted + ":0");
    return t;
  }
  if (IsVariableReadOp(op) || op == "PlaceholderWithDefault") {
    // A variable's value (the handle already is it), or a placeholder left to its default.
    if (values.size() != 1) return error("expects 1 input");
    model_.graph.nodes.push_back({emitted, "Identity", {values[0]}, {}});
    t.outputs.push_back(emitted + ":0");
    return t;
  }
  if (op == "Placeholder")
    return error("the signature does not feed this placeholder, and it has no default");
  OpTranslator translator = FindOpTranslator(op);
  if (translator == nullptr) {
    std::string supported;
    for (const std::string& s : TranslatedOps()) supported += (supported.empty() ? "" : ", ") + s;
    return error("op " + op + " is not supported by the SavedModel importer (it translates: " + supported +
                 ", variables and placeholders)");
  }
  NodeContext ctx(*this, node, emitted, std::move(values));
  LS_RETURN_IF_ERROR(translator(ctx, &t.outputs));
  return t;
}

}  // namespace

bool IsSavedModelDir(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / kSavedModelFile, ec);
}

StatusOr<Model> ImportMetaGraph(const tensorflow::MetaGraphDef& meta_graph, const Checkpoint* checkpoint) {
  LS_ASSIGN_OR_RETURN(FlatGraph graph, FlatGraph::Flatten(meta_graph.graph_def()));
  Importer importer(graph, checkpoint, CheckpointKeys(graph));
  // serving_default first, so that its nodes keep their TensorFlow names; then by name.
  std::vector<std::string> names;
  for (const auto& [name, def] : meta_graph.signature_def()) {
    if (name.starts_with("__")) continue;  // __saved_model_init_op and friends: not served
    names.push_back(name);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    if ((a == kDefaultSignature) != (b == kDefaultSignature)) return a == kDefaultSignature;
    return a < b;
  });
  if (names.empty()) return InvalidArgument("the \"serve\" graph has no signatures");
  for (const std::string& name : names) {
    LS_RETURN_IF_ERROR(importer.AddSignature(name, meta_graph.signature_def().at(name)));
  }
  LS_ASSIGN_OR_RETURN(Model model, std::move(importer).Finish());
  model.graph.metadata["format"] = "tensorflow_saved_model";
  tensorflow::MetaGraphDef signatures;
  *signatures.mutable_signature_def() = meta_graph.signature_def();
  model.graph.metadata[std::string(kSignatureDefsMetadataKey)] = Base64Encode(signatures.SerializeAsString());
  if (meta_graph.has_meta_info_def()) {
    const auto& info = meta_graph.meta_info_def();
    if (!info.tensorflow_version().empty())
      model.graph.metadata["tensorflow_version"] = info.tensorflow_version();
  }
  return model;
}

StatusOr<tensorflow::MetaGraphDef> ImportedSignatureDefs(const Graph& graph) {
  auto it = graph.metadata.find(std::string(kSignatureDefsMetadataKey));
  if (it == graph.metadata.end()) return NotFound("the model was not imported from a SavedModel");
  LS_ASSIGN_OR_RETURN(std::string bytes, Base64Decode(it->second));
  tensorflow::MetaGraphDef signatures;
  if (!signatures.ParseFromString(bytes)) {
    return InvalidArgument("metadata '" + std::string(kSignatureDefsMetadataKey) + "' is not a serialized MetaGraphDef");
  }
  return signatures;
}

StatusOr<Model> ReadSavedModel(const std::filesystem::path& dir) {
  const std::filesystem::path pb = dir / kSavedModelFile;
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const FileImage> image, FileImage::Read(pb, kMaxSavedModelBytes));
  tensorflow::SavedModel saved_model;
  if (!saved_model.ParseFromArray(image->data(), static_cast<int>(image->size()))) {
    return InvalidArgument(pb.string() + ": not a SavedModel protocol buffer (corrupted or truncated)");
  }
  const tensorflow::MetaGraphDef* serve = nullptr;
  for (const tensorflow::MetaGraphDef& mg : saved_model.meta_graphs()) {
    const auto& tags = mg.meta_info_def().tags();
    if (tags.size() == 1 && tags[0] == kSavedModelServeTag) serve = &mg;
  }
  if (serve == nullptr) return NotFound(pb.string() + ": no MetaGraphDef tagged exactly \"serve\"");

  const std::filesystem::path prefix = dir / "variables" / "variables";
  std::filesystem::path index = prefix;
  index += ".index";
  std::optional<Checkpoint> checkpoint;
  std::error_code ec;
  if (std::filesystem::exists(index, ec)) {
    StatusOr<Checkpoint> c = Checkpoint::Open(prefix);
    if (!c.ok()) return c.status();
    checkpoint = std::move(*c);
  }
  StatusOr<Model> model = ImportMetaGraph(*serve, checkpoint ? &*checkpoint : nullptr);
  if (!model.ok()) return model.status().WithPrefix(dir.string());
  return model;
}

}  // namespace lockstep
