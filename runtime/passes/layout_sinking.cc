// SinkLayoutChanges. Importers leave layout changes between the ops that compute:
//   - an NCHW model (ONNX) gets a Transpose pair around each NHWC window op, so Conv -> Relu ->
//     Conv runs Transpose(to NCHW) -> Relu -> Transpose(to NHWC) between the convolutions: two
//     passes over the activations that compute nothing;
//   - a dense layer over a sequence ([B, S, K] x [K, N]) is flattened to rows for the matmul
//     core and reshaped back, so its bias and activation come after a Reshape, where fusion
//     cannot put them into the matmul's epilogue.
// Element-wise ops do not care about layout: op(L(x)) = L(op(x)) for a Transpose or Reshape L.
// So layout changes are moved below element-wise ops, Pad and bias additions, and two that meet
// compose into one (or, for Transposes that cancel, into nothing). Every such rewrite computes
// the same element-wise operation on the same elements: the values are the same bits.
// A reduction moves below a Transpose too (an NCHW model's global pooling, which would
// otherwise keep an NHWC network's activations transposed back for it): the same elements
// reduced, but a sum (Mean, Sum) then adds them in the order they lie in the untransposed
// value, so its bits may differ in the last place; Max and Min give the same bits.
//
// A Transpose that only feeds a BatchMatMul operand folds into the product's transpose flag as
// far as it swaps the last two axes (FoldTransposeIntoProduct).
//
// A rewrite never adds a copy: a Transpose (a copy) moves below a unary op or Pad only when that
// op alone reads it, below a binary op only when one of its two Transposes is read by it alone;
// a Reshape (an alias, free) moves freely. An Add of a constant row to a value of that width is
// a BiasAdd, which FuseMatMul then folds into the matmul before it.
#include <optional>
#include <set>

#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

const std::set<std::string, std::less<>> kUnaryOps = {
    "Relu", "Relu6", "Sigmoid", "Silu", "Tanh", "Gelu", "Elu", "Selu", "LeakyRelu", "HardSwish",
    "HardSigmoid", "Softplus", "Softsign", "Erf", "Neg", "Abs", "Exp", "Log", "Sqrt", "Floor", "Ceil", "Cast"};
const std::set<std::string, std::less<>> kBinaryOps = {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum"};
const std::set<std::string, std::less<>> kReductionOps = {"Mean", "Sum", "Max", "Min"};

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
    // everything after two layout changes compose (consumers may have been rewired).
    touched_.assign(model_.graph.nodes.size(), false);
    bool changed = false;
    for (int i : a_.topological_order) {
      if (touched_[i]) continue;
      const std::string& op = model_.graph.nodes[i].op;
      const size_t arity = model_.graph.nodes[i].inputs.size();
      bool done = false;
      if ((op == "Transpose" || op == "Reshape") && arity >= 1) {
        if (Compose(i)) return true;
      } else if (kUnaryOps.count(op) > 0 && arity == 1) {
        done = SinkUnary(i);
      } else if (kBinaryOps.count(op) > 0 && arity == 2) {
        done = AddToBiasAdd(i) || SinkBinary(i);
      } else if (op == "BiasAdd" && arity == 2) {
        done = SinkBiasAdd(i);
      } else if (op == "Pad" && arity == 2) {
        done = SinkPad(i);
      } else if (kReductionOps.count(op) > 0 && arity == 1) {
        done = SinkReduction(i);
      } else if (op == "BatchMatMul" && arity == 2) {
        done = FoldTransposeIntoProduct(i);
      }
      if (done) {
        changed = true;
        for (ValueId v : a_.inputs[i]) touched_[v.node] = true;
        touched_[i] = true;
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

  const NodeDef& Node(int n) const { return model_.graph.nodes[n]; }
  bool IsTranspose(int n) const { return Node(n).op == "Transpose" && Node(n).attrs.Has("perm"); }
  bool IsReshape(int n) const { return Node(n).op == "Reshape"; }
  // Whether value v is the output of a layout change that op i may move below: a Reshape, or
  // a Transpose that i alone reads (unless `shared_ok`).
  bool Movable(ValueId v, bool shared_ok) const {
    // A node rewritten in this sweep is not what the analysis says it is.
    if (v.output != 0 || touched_[v.node]) return false;
    return IsReshape(v.node) || (IsTranspose(v.node) && (shared_ok || consumers_[v.node] == 1));
  }
  std::vector<int64_t> PermOf(int n) const {
    StatusOr<std::span<const int64_t>> perm = Node(n).attrs.GetInts("perm");
    return perm.ok() ? std::vector<int64_t>(perm->begin(), perm->end()) : std::vector<int64_t>();
  }
  // Whether layout changes a and b are the same change (same op, perm or target shape).
  bool SameChange(int a, int b) const {
    const NodeDef &x = Node(a), &y = Node(b);
    return x.op == y.op && x.attrs == y.attrs &&
           std::equal(x.inputs.begin() + 1, x.inputs.end(), y.inputs.begin() + 1, y.inputs.end());
  }
  const TensorSpec& SpecOf(const std::string& ref) const { return a_.Spec(*a_.Resolve(ref)); }

  // The last dimension of value v, -1 when unknown. Shape inference knows only the rank of a
  // Reshape to a computed target; but a target made by Concat(..., constant [.., N]) with N > 0
  // (how importers keep a sequence's leading dimensions and set the last) ends in N.
  int64_t LastDim(ValueId v) const {
    const Shape& shape = a_.Spec(v).shape;
    if (shape.rank() < 1) return -1;
    if (shape.dim(shape.rank() - 1) >= 0) return shape.dim(shape.rank() - 1);
    if (v.output != 0 || !IsReshape(v.node) || a_.inputs[v.node].size() != 2) return -1;
    const int concat = a_.inputs[v.node][1].node;
    if (Node(concat).op != "Concat" || a_.inputs[concat].empty()) return -1;
    const NodeDef& last = Node(a_.inputs[concat].back().node);
    StatusOr<std::string> weight = last.op == kConstOp ? last.attrs.GetString("weight") : StatusOr<std::string>(NotFound(""));
    if (!weight.ok()) return -1;
    auto it = model_.weights.find(*weight);
    if (it == model_.weights.end() || it->second.dtype() != DType::kInt64 || it->second.num_elements() < 1) return -1;
    const int64_t n = it->second.data<int64_t>().back();
    return n > 0 ? n : -1;
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

  // Node i, op(inputs) before, becomes layout change `layout` (its op, attrs and extra inputs)
  // of a new node computing op(inputs) with i's attrs.
  void Rewrite(int i, std::vector<std::string> inputs, int layout) {
    const NodeDef change = Node(layout);
    NodeDef& node = model_.graph.nodes[i];
    NodeDef moved{UniqueName(node.name + "/before_" + change.op), node.op, std::move(inputs), node.attrs};
    node.op = change.op;
    node.inputs = change.inputs;
    node.inputs[0] = moved.name;
    node.attrs = change.attrs;
    model_.graph.nodes.push_back(std::move(moved));
  }

  bool SinkUnary(int i) {
    const ValueId x = a_.inputs[i][0];
    if (!Movable(x, false)) return false;
    Rewrite(i, {Node(x.node).inputs[0]}, x.node);
    return true;
  }

  // Both operands changed alike, or one changed and the other a one-element value of rank 0 or
// (for a Transpose) a constant.
  // Two Transposes alike keep broadcasting as it was (same rank, axes moved alike); two
  // Reshapes alike need operands of one shape before them (with at most one unknown dimension,
  // equal sizes after the Reshape make them equal).
  bool SinkBinary(int i) {
    const ValueId x = a_.inputs[i][0], y = a_.inputs[i][1];
    if (Movable(x, true) && Movable(y, true) && SameChange(x.node, y.node) &&
        (IsReshape(x.node) || consumers_[x.node] == 1 || consumers_[y.node] == 1 || x.node == y.node)) {
      const std::string& a = Node(x.node).inputs[0];
      const std::string& b = Node(y.node).inputs[0];
      if (IsReshape(x.node)) {
        const Shape& sa = SpecOf(a).shape;
        int unknown = 0;
        for (int64_t d : sa.dims()) unknown += d < 0 ? 1 : 0;
        if (!(sa == SpecOf(b).shape) || unknown > 1) return false;
      }
      Rewrite(i, {a, b}, x.node);
      return true;
    }
    for (int side = 0; side < 2; ++side) {
      const ValueId changed = a_.inputs[i][side], other = a_.inputs[i][1 - side];
      if (!Movable(changed, false)) continue;
      std::vector<std::string> inputs = Node(i).inputs;
      if (a_.Spec(other).shape.rank() != 0) {
        std::optional<std::string> moved = ConstantBeforeTranspose(other, changed.node, Node(i).name);
        if (!moved) continue;
        inputs[1 - side] = *moved;
      }
      inputs[side] = Node(changed.node).inputs[0];
      Rewrite(i, std::move(inputs), changed.node);
      return true;
    }
    return false;
  }

  // op(T(x), c) = T(op(x, c')) for a constant c when c' is c seen from before Transpose t: c's
  // shape, padded with leading 1s to t's rank as broadcasting pads it, with each axis moved back
  // to where t takes it from. Only when that keeps c's elements in their order (its axes of more
  // than one element stay in the same order: an NCHW model's per-channel [C, 1, 1] scale), so c'
  // is c's data under another shape. Returns the name of a new constant holding c'.
  std::optional<std::string> ConstantBeforeTranspose(ValueId c, int t, const std::string& user) {
    const NodeDef& node = Node(c.node);
    StatusOr<std::string> weight = node.op == kConstOp ? node.attrs.GetString("weight") : StatusOr<std::string>(NotFound(""));
    const std::vector<int64_t> perm = IsTranspose(t) ? PermOf(t) : std::vector<int64_t>();
    if (!weight.ok() || perm.empty()) return std::nullopt;
    auto it = model_.weights.find(*weight);
    const auto rank = static_cast<int>(perm.size());
    if (it == model_.weights.end() || it->second.shape().rank() > rank) return std::nullopt;
    const Shape& shape = it->second.shape();
    std::vector<int64_t> padded(static_cast<size_t>(rank - shape.rank()), 1), moved(static_cast<size_t>(rank), 1);
    for (int k = 0; k < shape.rank(); ++k) padded.push_back(shape.dim(k));
    int64_t last_source = -1;
    for (int k = 0; k < rank; ++k) {
      const int64_t source = perm[static_cast<size_t>(k)];
      moved[static_cast<size_t>(source)] = padded[static_cast<size_t>(k)];
      if (padded[static_cast<size_t>(k)] == 1) continue;
      if (source < last_source) return std::nullopt;
      last_source = source;
    }
    StatusOr<Shape> moved_shape = Shape::FromDims(moved);
    if (!moved_shape.ok()) return std::nullopt;
    const std::string name = UniqueName(user + "/const_before_transpose");
    model_.weights.insert_or_assign(name, it->second.Reshaped(*moved_shape));
    model_.graph.nodes.push_back(NodeDef{name, std::string(kConstOp), {}, AttrMap{{"weight", name}}});
    return name;
  }

  // Add(x, c) or Add(c, x) of a constant row c [N] and x [..., N] is BiasAdd(x, c): the same
  // additions (a + b is b + a, bit for bit).
  bool AddToBiasAdd(int i) {
    NodeDef& node = model_.graph.nodes[i];
    if (node.op != "Add") return false;
    for (int side = 0; side < 2; ++side) {
      const ValueId c = a_.inputs[i][side], x = a_.inputs[i][1 - side];
      const TensorSpec &cs = a_.Spec(c), &xs = a_.Spec(x);
      if (Node(c.node).op != kConstOp || cs.shape.rank() != 1 || xs.shape.rank() < 2 || cs.dtype != xs.dtype ||
          (xs.dtype != DType::kFloat32 && xs.dtype != DType::kFloat64) || cs.shape.dim(0) < 0 ||
          LastDim(x) != cs.shape.dim(0)) {
        continue;
      }
      const std::string row = node.inputs[side], value = node.inputs[1 - side];
      node.op = "BiasAdd";
      node.inputs = {value, row};
      return true;
    }
    return false;
  }

  // BiasAdd(L(x), c) = L(BiasAdd(x, c)) when x's last axis is L's output's last axis: a
  // Transpose that leaves the last axis in place, a Reshape that keeps the last dimension.
  bool SinkBiasAdd(int i) {
    const ValueId x = a_.inputs[i][0];
    if (!Movable(x, false)) return false;
    const ValueId before = a_.inputs[x.node][0];
    if (IsTranspose(x.node)) {
      const std::vector<int64_t> perm = PermOf(x.node);
      if (perm.empty() || perm.back() != static_cast<int64_t>(perm.size()) - 1) return false;
    } else if (LastDim(before) < 0 || LastDim(before) != LastDim(x)) {
      return false;
    }
    Rewrite(i, {Node(x.node).inputs[0], Node(i).inputs[1]}, x.node);
    return true;
  }

  // Pad(T(x), pads) = T(Pad(x, pads')), each axis's pads moved to the axis it comes from; for
  // constant pads (an NCHW model's explicit convolution padding).
  bool SinkPad(int i) {
    const ValueId x = a_.inputs[i][0];
    const NodeDef& pads_node = Node(a_.inputs[i][1].node);
    if (!Movable(x, false) || !IsTranspose(x.node) || pads_node.op != kConstOp) return false;
    const std::vector<int64_t> perm = PermOf(x.node);
    StatusOr<std::string> weight = pads_node.attrs.GetString("weight");
    if (perm.empty() || !weight.ok()) return false;
    auto it = model_.weights.find(*weight);
    const size_t rank = perm.size();
    if (it == model_.weights.end() || it->second.dtype() != DType::kInt64 ||
        it->second.num_elements() != static_cast<int64_t>(2 * rank)) {
      return false;
    }
    const std::span<const int64_t> given = it->second.data<int64_t>();
    std::vector<int64_t> moved(2 * rank);
    for (size_t j = 0; j < rank; ++j) {
      const size_t from = static_cast<size_t>(perm[j]);
      moved[from] = given[j];
      moved[rank + from] = given[rank + j];
    }
    const std::string name = UniqueName(Node(i).name + "/pads_before_transpose");
    model_.weights.insert_or_assign(name, Tensor::FromVector<int64_t>(Shape{static_cast<int64_t>(2 * rank)}, moved));
    model_.graph.nodes.push_back(NodeDef{name, std::string(kConstOp), {}, AttrMap{{"weight", name}}});
    Rewrite(i, {Node(x.node).inputs[0], name}, x.node);
    return true;
  }

 public:
  // Once nothing moves: each Transpose that moves only dimensions of size 1 (a pooled
  // [N, 1, 1, C] to [N, C, 1, 1]) keeps the elements in order: it is a Reshape, which aliases
  // instead of copying. (Not while sinking: a Reshape would stop it cancelling with another.)
  Status TransposesToReshapes() {
    LS_ASSIGN_OR_RETURN(a_, AnalyzeGraph(model_, registry_));
    for (size_t i = 0; i < model_.graph.nodes.size(); ++i) TransposeToReshape(static_cast<int>(i));
    return Status::Ok();
  }

 private:
  // For a shape known but for at most one dimension (which stays where it is, as the
  // Reshape's -1).
  bool TransposeToReshape(int i) {
    if (!IsTranspose(i)) return false;
    const std::vector<int64_t> perm = PermOf(i);
    const Shape& in = a_.Spec(a_.inputs[i][0]).shape;
    if (perm.empty() || in.rank() != static_cast<int>(perm.size())) return false;
    int64_t last = -1;
    int unknown = 0;
    std::vector<int64_t> target;
    for (int64_t axis : perm) {
      const int64_t d = in.dim(static_cast<int>(axis));
      if (d == 0) return false;  // a Reshape's -1 cannot be told from the others' sizes
      unknown += d < 0 ? 1 : 0;
      target.push_back(d);
      if (d == 1) continue;
      if (axis < last) return false;
      last = axis;
    }
    if (unknown > 1) return false;
    NodeDef& node = model_.graph.nodes[i];
    node.op = "Reshape";
    node.attrs = AttrMap{{"shape", target}};
    return true;
  }

  // Reduce(T(x), axes) = T'(Reduce(x, perm[axes])): with kept dimensions T' is T (the reduced
  // axes stay where T puts them, as 1s); without, T' is T's perm of the axes that remain,
  // renumbered, and nothing when that is the identity. For axes given as an attr.
  bool SinkReduction(int i) {
    const ValueId x = a_.inputs[i][0];
    NodeDef& node = model_.graph.nodes[i];
    if (!Movable(x, false) || !IsTranspose(x.node) || !node.attrs.Has("axes")) return false;
    const std::vector<int64_t> perm = PermOf(x.node);
    StatusOr<std::span<const int64_t>> axes = node.attrs.GetInts("axes");
    StatusOr<bool> keep = node.attrs.GetBoolOr("keep_dims", false);
    const auto rank = static_cast<int64_t>(perm.size());
    if (perm.empty() || !axes.ok() || !keep.ok()) return false;
    std::vector<bool> reduced_source(perm.size(), false);
    std::vector<bool> reduced(perm.size(), false);
    for (int64_t axis : *axes) {
      const int64_t a = axis < 0 ? axis + rank : axis;
      if (a < 0 || a >= rank) return false;
      reduced[static_cast<size_t>(a)] = true;
      reduced_source[static_cast<size_t>(perm[static_cast<size_t>(a)])] = true;
    }
    std::vector<int64_t> moved_axes, renumbered(perm.size(), -1);
    int64_t remaining = 0;
    for (int64_t s = 0; s < rank; ++s) {
      if (reduced_source[static_cast<size_t>(s)]) moved_axes.push_back(s);
      else renumbered[static_cast<size_t>(s)] = remaining++;
    }
    std::vector<int64_t> after = perm;  // T' for kept dimensions
    bool identity = false;
    if (!*keep) {
      after.clear();
      identity = true;
      for (size_t j = 0; j < perm.size(); ++j) {
        if (reduced[j]) continue;
        identity = identity && renumbered[static_cast<size_t>(perm[j])] == static_cast<int64_t>(after.size());
        after.push_back(renumbered[static_cast<size_t>(perm[j])]);
      }
    }
    node.attrs.Set("axes", moved_axes);
    const std::string source = Node(x.node).inputs[0];
    if (identity) {
      node.inputs[0] = source;
      return true;
    }
    Rewrite(i, {source}, x.node);
    model_.graph.nodes[i].attrs = AttrMap{{"perm", after}};
    return true;
  }

  // A BatchMatMul operand that a Transpose makes by moving the innermost axis to the second
  // last place (attention's K^T: [S, H, D] -> [H, D, S], a tile-by-tile copy) reads instead the
  // Transpose that keeps the innermost axis ([S, H, D] -> [H, S, D], whole rows), or x itself,
  // with the product's transpose flag for that operand flipped. The Gemm packs an operand the
  // same whichever way it is stored: the same bits.
  bool FoldTransposeIntoProduct(int i) {
    for (int k = 0; k < 2; ++k) {
      const ValueId x = a_.inputs[i][static_cast<size_t>(k)];
      if (!Movable(x, false) || !IsTranspose(x.node)) continue;
      std::vector<int64_t> perm = PermOf(x.node);
      const size_t r = perm.size();
      if (r < 2 || perm[r - 2] != static_cast<int64_t>(r) - 1) continue;
      std::swap(perm[r - 2], perm[r - 1]);
      bool identity = true;
      for (size_t d = 0; d < r; ++d) identity = identity && perm[d] == static_cast<int64_t>(d);
      NodeDef& node = model_.graph.nodes[i];
      const char* flag = k == 0 ? "transpose_a" : "transpose_b";
      StatusOr<bool> transposed = node.attrs.GetBoolOr(flag, false);
      if (!transposed.ok()) continue;
      node.attrs.Set(flag, !*transposed);
      if (identity) {
        node.inputs[static_cast<size_t>(k)] = Node(x.node).inputs[0];
      } else {
        model_.graph.nodes[x.node].attrs.Set("perm", perm);
      }
      return true;
    }
    return false;
  }

  // Reshape of a Reshape is the second Reshape of the first's input (for a target that does not
  // copy dimensions from its input). Transpose(Q) of
  // Transpose(P) is Transpose(P[Q]); an identity is dropped, and its consumers read the first
  // Transpose's input.
  bool Compose(int i) {
    const ValueId x = a_.inputs[i][0];
    if (x.output != 0 || touched_[x.node]) return false;
    NodeDef& node = model_.graph.nodes[i];
    if (IsReshape(i)) {
      // A computed target's 0s copy the input's dimensions, unless allowzero: such a Reshape
      // must keep its input.
      StatusOr<bool> allow_zero = node.attrs.GetBoolOr("allowzero", false);
      if (!IsReshape(x.node) || (node.inputs.size() > 1 && !(allow_zero.ok() && *allow_zero))) return false;
      node.inputs[0] = Node(x.node).inputs[0];
      return true;
    }
    if (!IsTranspose(i) || !IsTranspose(x.node)) return false;
    const std::vector<int64_t> p = PermOf(x.node), q = PermOf(i);
    if (p.empty() || q.empty() || p.size() != q.size()) return false;
    std::vector<int64_t> r(q.size());
    bool identity = true;
    for (size_t k = 0; k < q.size(); ++k) {
      r[k] = p[static_cast<size_t>(q[k])];
      identity = identity && r[k] == static_cast<int64_t>(k);
    }
    const std::string source = Node(x.node).inputs[0];
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
    NodeDef& same = model_.graph.nodes[i];
    same.op = "Identity";
    same.inputs = {source};
    same.attrs = AttrMap{};
    return true;
  }

  Model& model_;
  const OpRegistry& registry_;
  GraphAnalysis a_;
  std::vector<int> consumers_;
  std::vector<bool> touched_;
  std::set<std::string> added_;
};

}  // namespace

Status SinkLayoutChanges(Model& model, const OpRegistry& registry) {
  if (registry.Find("Transpose") == nullptr || registry.Find("Reshape") == nullptr) return Status::Ok();
  Sinker sinker(model, registry);
  // Each sweep moves every layout change it can at least one op down or removes it: bounded
  // by the graph's depth, and by its size for safety.
  const size_t max_sweeps = model.graph.nodes.size() + 1;
  for (size_t s = 0; s < max_sweeps; ++s) {
    LS_ASSIGN_OR_RETURN(bool changed, sinker.Sweep());
    if (!changed) break;
  }
  LS_RETURN_IF_ERROR(sinker.TransposesToReshapes());
  return AnalyzeGraph(model, registry).status();
}

}  // namespace lockstep
