// SinkTransposes: importers of NCHW models (ONNX) wrap each NHWC window op in a Transpose pair,
// so a Conv -> Relu -> Conv chain runs Transpose(to NCHW) -> Relu -> Transpose(to NHWC) between
// the two convolutions: two passes over the activations that compute nothing. Element-wise ops
// do not care about layout, so a Transpose is moved below them (op(T(x)) = T(op(x))), and two
// Transposes that meet compose into one, or into nothing. Every rewrite is exact: the same
// element-wise operation on the same elements.
//
// Pad moves too, its constant pads following their axes. A rewrite never adds a Transpose to
// the graph: a unary op (or Pad) is moved past a Transpose that it alone reads, a binary op past
// two Transposes of which at least one it alone reads.
#include <set>

#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

const std::set<std::string, std::less<>> kUnaryOps = {
    "Relu", "Relu6", "Sigmoid", "Tanh", "Gelu", "Elu", "Selu", "LeakyRelu", "HardSwish",
    "HardSigmoid", "Softplus", "Softsign", "Erf", "Neg", "Abs", "Exp", "Log", "Sqrt", "Floor", "Ceil", "Cast"};
const std::set<std::string, std::less<>> kBinaryOps = {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum"};

class Sinker {
 public:
  Sinker(Model& model, const OpRegistry& registry) : model_(model), registry_(registry) {}

  // One sweep; true when it rewrote something.
  StatusOr<bool> Sweep() {
    // What the last sweep left behind would count as consumers and block rewrites.
    LS_RETURN_IF_ERROR(EliminateDeadNodes(model_, registry_));
    LS_ASSIGN_OR_RETURN(a_, AnalyzeGraph(model_, registry_));
    CountConsumers();
    // Rewrites append nodes and change the rewritten node in place, so indices stay valid
    // for the rest of the sweep; a node touched once waits for the next sweep, and so does
    // everything after two Transposes compose (consumers may have been rewired).
    std::vector<bool> touched(model_.graph.nodes.size(), false);
    bool changed = false;
    for (int i : a_.topological_order) {
      if (touched[i]) continue;
      const std::string& op = model_.graph.nodes[i].op;
      const size_t arity = model_.graph.nodes[i].inputs.size();
      bool done = false;
      if (op == "Transpose" && arity == 1) {
        if (Compose(i)) return true;
      } else if (kUnaryOps.count(op) > 0 && arity == 1) {
        done = SinkUnary(i);
      } else if (kBinaryOps.count(op) > 0 && arity == 2) {
        done = SinkBinary(i);
      } else if (op == "Pad" && arity == 2) {
        done = SinkPad(i);
      }
      if (done) {
        changed = true;
        for (ValueId v : a_.inputs[i]) touched[v.node] = true;
        touched[i] = true;
      }
    }
    return changed;
  }

 private:
  void CountConsumers() {
    consumers_.assign(model_.graph.nodes.size(), 0);
    for (const auto& ins : a_.inputs) {
      for (ValueId v : ins) ++consumers_[v.node];
    }
    for (const Signature& sig : model_.graph.signatures) {
      for (const auto* list : {&sig.inputs, &sig.outputs}) {
        for (const TensorBinding& b : *list) {
          if (StatusOr<ValueId> v = a_.Resolve(b.tensor); v.ok()) ++consumers_[v->node];
        }
      }
    }
  }

  // The perm of node `n` when it is a Transpose with a perm attr, else empty.
  std::vector<int64_t> PermOf(int n) const {
    const NodeDef& node = model_.graph.nodes[n];
    if (node.op != "Transpose") return {};
    StatusOr<std::span<const int64_t>> perm = node.attrs.GetInts("perm");
    if (!perm.ok()) return {};
    return std::vector<int64_t>(perm->begin(), perm->end());
  }

  std::string UniqueName(const std::string& base) {
    std::string name = base;
    auto taken = [&](const std::string& n) {
      return a_.node_index.count(n) > 0 || added_.count(n) > 0 || model_.weights.count(n) > 0;
    };
    for (int k = 1; taken(name); ++k) name = base + "_" + std::to_string(k);
    added_.insert(name);
    return name;
  }

  // Node i becomes Transpose(perm) of a new node computing `op` on `inputs` with its attrs.
  void Rewrite(int i, std::vector<std::string> inputs, const std::vector<int64_t>& perm) {
    NodeDef& node = model_.graph.nodes[i];
    NodeDef moved{UniqueName(node.name + "/before_transpose"), node.op, std::move(inputs), node.attrs};
    node.op = "Transpose";
    node.inputs = {moved.name};
    node.attrs = AttrMap{{"perm", perm}};
    model_.graph.nodes.push_back(std::move(moved));
  }

  bool SinkUnary(int i) {
    const int t = a_.inputs[i][0].node;
    const std::vector<int64_t> perm = PermOf(t);
    if (perm.empty() || consumers_[t] != 1) return false;
    Rewrite(i, {model_.graph.nodes[t].inputs[0]}, perm);
    return true;
  }

  // Both operands transposed alike (same rank, so broadcasting commutes with the transpose),
  // or one transposed and the other a one-element value of rank 0.
  bool SinkBinary(int i) {
    const ValueId x = a_.inputs[i][0], y = a_.inputs[i][1];
    const std::vector<int64_t> px = PermOf(x.node), py = PermOf(y.node);
    const NodeDef& node = model_.graph.nodes[i];
    if (!px.empty() && px == py) {
      if (consumers_[x.node] != 1 && consumers_[y.node] != 1 && x.node != y.node) return false;
      Rewrite(i, {model_.graph.nodes[x.node].inputs[0], model_.graph.nodes[y.node].inputs[0]}, px);
      return true;
    }
    for (int side = 0; side < 2; ++side) {
      const ValueId t = side == 0 ? x : y, other = side == 0 ? y : x;
      const std::vector<int64_t>& perm = side == 0 ? px : py;
      if (perm.empty() || consumers_[t.node] != 1 || a_.Spec(other).shape.rank() != 0) continue;
      std::vector<std::string> inputs = node.inputs;
      inputs[side] = model_.graph.nodes[t.node].inputs[0];
      Rewrite(i, std::move(inputs), perm);
      return true;
    }
    return false;
  }

  // Pad(T(x), pads) = T(Pad(x, pads')), each axis's pads moved to the axis it comes from; for
  // constant pads (an NCHW model's explicit convolution padding).
  bool SinkPad(int i) {
    const int t = a_.inputs[i][0].node;
    const std::vector<int64_t> perm = PermOf(t);
    const NodeDef& pads_node = model_.graph.nodes[a_.inputs[i][1].node];
    if (perm.empty() || consumers_[t] != 1 || pads_node.op != kConstOp) return false;
    StatusOr<std::string> weight = pads_node.attrs.GetString("weight");
    if (!weight.ok()) return false;
    auto it = model_.weights.find(*weight);
    const size_t rank = perm.size();
    if (it == model_.weights.end() || it->second.dtype() != DType::kInt64 || it->second.num_elements() != static_cast<int64_t>(2 * rank)) {
      return false;
    }
    const std::span<const int64_t> given = it->second.data<int64_t>();
    std::vector<int64_t> moved(2 * rank);
    for (size_t j = 0; j < rank; ++j) {
      const size_t from = static_cast<size_t>(perm[j]);
      moved[from] = given[j];
      moved[rank + from] = given[rank + j];
    }
    const std::string name = UniqueName(model_.graph.nodes[i].name + "/pads_before_transpose");
    model_.weights.insert_or_assign(name, Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(2 * rank)}, moved));
    model_.graph.nodes.push_back(NodeDef{name, std::string(kConstOp), {}, AttrMap{{"weight", name}}});
    Rewrite(i, {model_.graph.nodes[t].inputs[0], name}, perm);
    return true;
  }

  // Transpose(Q) of Transpose(P) is Transpose(P[Q]): an identity is dropped and its consumers
  // read the first Transpose's input.
  bool Compose(int i) {
    const int t = a_.inputs[i][0].node;
    const std::vector<int64_t> p = PermOf(t), q = PermOf(i);
    if (p.empty() || q.empty() || p.size() != q.size()) return false;
    std::vector<int64_t> r(q.size());
    bool identity = true;
    for (size_t k = 0; k < q.size(); ++k) {
      r[k] = p[static_cast<size_t>(q[k])];
      identity = identity && r[k] == static_cast<int64_t>(k);
    }
    NodeDef& node = model_.graph.nodes[i];
    const std::string source = model_.graph.nodes[t].inputs[0];
    if (!identity) {
      node.inputs = {source};
      node.attrs = AttrMap{{"perm", r}};
      return true;
    }
    // Consumers read `source` instead; a signature output keeps the name through an Identity.
    const std::string name = node.name;
    for (NodeDef& n : model_.graph.nodes) {
      for (std::string& in : n.inputs) {
        if (in == name || in == name + ":0") in = source;
      }
    }
    node.op = "Identity";
    node.inputs = {source};
    node.attrs = AttrMap{};
    return true;
  }

  Model& model_;
  const OpRegistry& registry_;
  GraphAnalysis a_;
  std::vector<int> consumers_;
  std::set<std::string> added_;
};

}  // namespace

Status SinkTransposes(Model& model, const OpRegistry& registry) {
  if (registry.Find("Transpose") == nullptr) return Status::Ok();
  Sinker sinker(model, registry);
  // Each sweep moves every Transpose at least one op down or removes it: bounded by the
  // graph's depth, and by its size for safety.
  const size_t max_sweeps = model.graph.nodes.size() + 1;
  for (size_t s = 0; s < max_sweeps; ++s) {
    LS_ASSIGN_OR_RETURN(bool changed, sinker.Sweep());
    if (!changed) break;
  }
  return AnalyzeGraph(model, registry).status();
}

}  // namespace lockstep
