#include "runtime/graph_analysis.h"

namespace lockstep {

StatusOr<ValueId> GraphAnalysis::Resolve(std::string_view ref) const {
  LS_ASSIGN_OR_RETURN(TensorRef r, ParseTensorRef(ref));
  auto it = node_index.find(r.node);
  if (it == node_index.end()) return NotFound("no node named '" + std::string(r.node) + "'");
  if (r.index >= static_cast<int>(outputs[it->second].size())) {
    return NotFound("node '" + std::string(r.node) + "' has no output " + std::to_string(r.index));
  }
  return ValueId{it->second, r.index};
}

bool SpecCompatible(const TensorSpec& actual, const TensorSpec& declared) {
  if (actual.dtype != declared.dtype || actual.shape.rank() != declared.shape.rank()) return false;
  for (int i = 0; i < actual.shape.rank(); ++i) {
    int64_t a = actual.shape[i], d = declared.shape[i];
    if (a >= 0 && d >= 0 && a != d) return false;
  }
  return true;
}

namespace {

std::string NodeLabel(const NodeDef& n) { return "node '" + n.name + "' (" + n.op + ")"; }

StatusOr<TensorSpec> WeightSpec(const Model& model, const NodeDef& node) {
  auto name = node.attrs.GetString("weight");
  if (!name.ok()) return name.status().WithPrefix(NodeLabel(node));
  auto it = model.weights.find(*name);
  if (it == model.weights.end()) {
    return NotFound(NodeLabel(node) + ": weight '" + *name + "' does not exist");
  }
  return TensorSpec{it->second.dtype(), it->second.shape()};
}

// The value of `v` when a Const node gives it (not a Variable: training changes those), with
// its data still there (a session may have dropped a packed weight's).
const Tensor* ConstantValue(const Model& model, const GraphAnalysis& a, ValueId v) {
  if (a.ops[static_cast<size_t>(v.node)]->name != kConstOp) return nullptr;
  StatusOr<std::string_view> name = model.graph.nodes[static_cast<size_t>(v.node)].attrs.GetStringViewOr("weight", "");
  if (!name.ok()) return nullptr;
  auto it = model.weights.find(*name);
  return it == model.weights.end() || (it->second.raw_data() == nullptr && it->second.num_elements() > 0) ? nullptr
                                                                                                          : &it->second;
}

StatusOr<TensorSpec> InputSpec(const NodeDef& node) {
  auto dtype = node.attrs.GetDType("dtype");
  if (!dtype.ok()) return dtype.status().WithPrefix(NodeLabel(node));
  auto shape = node.attrs.GetShape("shape");
  if (!shape.ok()) return shape.status().WithPrefix(NodeLabel(node));
  return TensorSpec{*dtype, *shape};
}

// Every Input node a signature's outputs depend on must be fed by that signature; otherwise
// a run would compute with a value nobody gave.
Status CheckEveryInputBound(const Model& model, const GraphAnalysis& a, const Signature& sig,
                            const std::vector<bool>& bound_input) {
  std::vector<bool> seen(a.ops.size(), false);
  std::vector<int> stack;
  for (const TensorBinding& b : sig.outputs) {
    int node = a.Resolve(b.tensor)->node;  // resolved by the caller already
    if (!seen[node]) {
      seen[node] = true;
      stack.push_back(node);
    }
  }
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (a.ops[i]->name == kInputOp && !bound_input[i]) {
      return InvalidArgument("signature '" + sig.name + "' computes its outputs from Input node '" +
                             model.graph.nodes[i].name + "', which none of its inputs binds");
    }
    for (ValueId v : a.inputs[i]) {
      if (!seen[v.node]) {
        seen[v.node] = true;
        stack.push_back(v.node);
      }
    }
  }
  return Status::Ok();
}

Status CheckSignatures(const Model& model, const GraphAnalysis& a) {
  if (model.graph.signatures.empty()) return InvalidArgument("the graph has no signature");
  std::map<std::string, int, std::less<>> seen;
  for (const Signature& sig : model.graph.signatures) {
    if (sig.name.empty()) return InvalidArgument("a signature has an empty name");
    if (!seen.emplace(sig.name, 0).second) return InvalidArgument("signature '" + sig.name + "' defined twice");
    if (sig.outputs.empty()) return InvalidArgument("signature '" + sig.name + "' has no outputs");
    std::vector<bool> bound_input(a.ops.size(), false);
    for (const auto* list : {&sig.inputs, &sig.outputs}) {
      const bool is_input = list == &sig.inputs;
      std::map<std::string, int, std::less<>> keys;
      for (const TensorBinding& b : *list) {
        std::string where = "signature '" + sig.name + "' " + (is_input ? "input" : "output") + " '" + b.key + "'";
        if (b.key.empty()) return InvalidArgument("signature '" + sig.name + "' has an entry with an empty key");
        if (!keys.emplace(b.key, 0).second) return InvalidArgument(where + " appears twice");
        auto v = a.Resolve(b.tensor);
        if (!v.ok()) return InvalidArgument(where + " refers to '" + b.tensor + "': " + v.status().message());
        if (is_input && a.ops[v->node]->name != kInputOp) {
          return InvalidArgument(where + " refers to '" + b.tensor + "', which is not an Input node");
        }
        if (is_input) {
          // Two keys feeding one node would make one of them silently ignored.
          if (bound_input[v->node]) return InvalidArgument(where + " binds '" + b.tensor + "', which another input of the signature binds already");
          bound_input[v->node] = true;
        }
        const TensorSpec& actual = a.Spec(*v);
        if (!SpecCompatible(actual, {b.dtype, b.shape})) {
          return InvalidArgument(where + " declares " + std::string(DTypeName(b.dtype)) + b.shape.ToString() +
                                 " but the graph computes " + std::string(DTypeName(actual.dtype)) +
                                 actual.shape.ToString());
        }
      }
    }
    LS_RETURN_IF_ERROR(CheckEveryInputBound(model, a, sig, bound_input));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GraphAnalysis> AnalyzeGraph(const Model& model, const OpRegistry& registry) {
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeNodes(model, registry));
  LS_RETURN_IF_ERROR(CheckSignatures(model, a));
  return a;
}

StatusOr<GraphAnalysis> AnalyzeNodes(const Model& model, const OpRegistry& registry) {
  const auto& nodes = model.graph.nodes;
  const int n = static_cast<int>(nodes.size());
  GraphAnalysis a;
  a.ops.resize(n);
  a.inputs.resize(n);
  a.outputs.resize(n);

  for (int i = 0; i < n; ++i) {
    const NodeDef& node = nodes[i];
    if (node.name.empty()) return InvalidArgument("node #" + std::to_string(i) + " has an empty name");
    if (node.name.find(':') != std::string::npos) return InvalidArgument("node name '" + node.name + "' contains ':'");
    if (!a.node_index.emplace(node.name, i).second) return InvalidArgument("node name '" + node.name + "' is used twice");
    const OpDef* op = registry.Find(node.op);
    if (op == nullptr) return InvalidArgument("node '" + node.name + "' uses unknown op '" + node.op + "'");
    const int k = static_cast<int>(node.inputs.size());
    if (k < op->min_inputs || (op->max_inputs >= 0 && k > op->max_inputs)) {
      return InvalidArgument(NodeLabel(node) + " has " + std::to_string(k) + " inputs; the op takes " +
                             std::to_string(op->min_inputs) + (op->max_inputs < 0 ? " or more" :
                             op->max_inputs == op->min_inputs ? "" : " to " + std::to_string(op->max_inputs)));
    }
    const int num_outputs = NodeOutputCount(*op, node.attrs);
    if (num_outputs < 0) return InvalidArgument(NodeLabel(node) + " does not say how many outputs it has");
    a.ops[i] = op;
    a.outputs[i].resize(static_cast<size_t>(num_outputs));
  }

  // Resolve inputs, then order producers before consumers (Kahn); leftovers form a cycle.
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    for (const std::string& ref : nodes[i].inputs) {
      auto v = a.Resolve(ref);
      if (!v.ok()) return InvalidArgument(NodeLabel(nodes[i]) + " input '" + ref + "': " + v.status().message());
      a.inputs[i].push_back(*v);
      consumers[v->node].push_back(i);
      ++pending[i];
    }
  }
  std::vector<int> ready;
  for (int i = n - 1; i >= 0; --i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    a.topological_order.push_back(i);
    for (int c : consumers[i]) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (static_cast<int>(a.topological_order.size()) != n) {
    for (int i = 0; i < n; ++i) {
      if (pending[i] > 0) return InvalidArgument("the graph has a cycle through node '" + nodes[i].name + "'");
    }
  }

  for (int i : a.topological_order) {
    const NodeDef& node = nodes[i];
    const OpDef& op = *a.ops[i];
    if (op.name == kInputOp) {
      LS_ASSIGN_OR_RETURN(a.outputs[i][0], InputSpec(node));
      continue;
    }
    if (op.name == kConstOp || op.name == kVariableOp) {
      LS_ASSIGN_OR_RETURN(a.outputs[i][0], WeightSpec(model, node));
      continue;
    }
    std::vector<TensorSpec> in;
    std::vector<const Tensor*> values;
    for (ValueId v : a.inputs[i]) {
      in.push_back(a.Spec(v));
      values.push_back(ConstantValue(model, a, v));
    }
    auto inferred = op.infer({in, node.attrs, values});
    if (!inferred.ok()) return inferred.status().WithPrefix(NodeLabel(node));
    if (inferred->size() != a.outputs[i].size()) {
      return Internal(NodeLabel(node) + ": shape inference returned the wrong number of outputs");
    }
    for (const TensorSpec& spec : *inferred) {
      if (!spec.shape.KnownDimsWithin()) {
        return InvalidArgument(NodeLabel(node) + " would compute a tensor of shape " + spec.shape.ToString() +
                               ", more than " + std::to_string(Shape::kMaxElements) + " elements");
      }
    }
    a.outputs[i] = std::move(*inferred);
  }
  return a;
}

}  // namespace lockstep
