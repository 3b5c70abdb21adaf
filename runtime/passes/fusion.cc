#include <map>
#include <string>

#include "runtime/activation.h"
#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

// Each activation op with the epilogue's name for it.
const std::map<std::string, std::string, std::less<>> kActivationOps = {
    {"Relu", "relu"}, {"Gelu", "gelu"}, {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"},  {"Relu6", "relu6"},
    {"Elu", "elu"},   {"Selu", "selu"}, {"Silu", "silu"},       {"HardSwish", "hard_swish"}};

// Who reads each node's value, for folding a value into its consumer: only if nothing else
// sees it. Nodes already part of a fused node (removed, or replaced by one) fuse no further.
struct Readers {
  std::vector<std::vector<int>> consumers;
  std::vector<bool> exported, removed, fused_in;

  static StatusOr<Readers> Of(const Model& model, const GraphAnalysis& a) {
    const size_t n = model.graph.nodes.size();
    Readers r{std::vector<std::vector<int>>(n), std::vector<bool>(n, false), std::vector<bool>(n, false),
              std::vector<bool>(n, false)};
    for (size_t i = 0; i < n; ++i) {
      for (ValueId v : a.inputs[i]) r.consumers[v.node].push_back(static_cast<int>(i));
    }
    for (const Signature& sig : model.graph.signatures) {
      for (const TensorBinding& b : sig.outputs) {
        LS_ASSIGN_OR_RETURN(ValueId v, a.Resolve(b.tensor));
        r.exported[v.node] = true;
      }
    }
    return r;
  }
  // The one node that reads node i's value, -1 when none or several do (or a signature does).
  int SoleConsumer(int i) const {
    if (exported[i] || consumers[i].size() != 1 || fused_in[consumers[i][0]]) return -1;
    return consumers[i][0];
  }
  // Node `last` becomes `fused`; the other nodes of `parts` go.
  void Fuse(std::vector<NodeDef>& nodes, std::initializer_list<int> parts, int last, NodeDef fused) {
    for (int k : parts) {
      if (k >= 0) fused_in[k] = true;
      if (k >= 0 && k != last) removed[k] = true;
    }
    nodes[last] = std::move(fused);
  }
  void DropRemoved(std::vector<NodeDef>& nodes) const {
    std::vector<NodeDef> kept;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!removed[i]) kept.push_back(std::move(nodes[i]));
    }
    nodes = std::move(kept);
  }
};

}  // namespace

Status FuseMatMul(Model& model, const OpRegistry& registry) {
  if (registry.Find("FusedMatMul") == nullptr) return Status::Ok();
  const OpDef* fused_conv = registry.Find("FusedConv2D");
  const OpDef* fused_depthwise = registry.Find("FusedDepthwiseConv2D");
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  auto& nodes = model.graph.nodes;
  LS_ASSIGN_OR_RETURN(Readers readers, Readers::Of(model, a));
  const std::vector<bool>& removed = readers.removed;
  auto sole_consumer = [&](int i) { return readers.SoleConsumer(i); };

  for (int i : a.topological_order) {
    const bool depthwise = nodes[i].op == "DepthwiseConv2D";
    const bool conv = nodes[i].op == "Conv2D" || depthwise;
    if ((nodes[i].op != "MatMul" && !conv) || removed[i]) continue;
    if (conv && ((depthwise ? fused_depthwise : fused_conv) == nullptr || a.outputs[i][0].dtype != DType::kFloat32)) {
      continue;
    }
    // BiasAdd's bias must be its second input, with the MatMul as the first.
    int bias_node = -1, act_node = -1, last = i;
    int c = sole_consumer(i);
    if (c >= 0 && nodes[c].op == "BiasAdd" && a.inputs[c][0].node == i && a.inputs[c][1].node != i &&
        a.outputs[i][0].dtype == DType::kFloat32) {
      bias_node = c;
      last = c;
      c = sole_consumer(c);
    }
    // A convolution's skip connection: Add(conv + bias, r) with r of the output's shape (not a
    // broadcast), added in the epilogue before the activation.
    int residual_node = -1;
    std::string residual;
    if (conv && !depthwise && bias_node >= 0 && c >= 0 && nodes[c].op == "Add" && a.inputs[c].size() == 2) {
      for (int side = 0; side < 2; ++side) {
        const ValueId other = a.inputs[c][1 - side];
        if (a.inputs[c][side].node != bias_node || other.node == bias_node) continue;
        const TensorSpec &rs = a.Spec(other), &os = a.outputs[i][0];
        if (rs.dtype == DType::kFloat32 && rs.shape == os.shape && os.shape.rank() == 4) {
          residual_node = c;
          residual = nodes[c].inputs[1 - side];
          last = c;
          c = sole_consumer(c);
        }
        break;
      }
    }
    if (c >= 0 && kActivationOps.count(nodes[c].op) > 0) {
      act_node = c;
      last = c;
    }
    if (last == i) continue;

    NodeDef fused;
    fused.name = nodes[last].name;  // consumers keep referring to the same name
    fused.op = depthwise ? "FusedDepthwiseConv2D" : conv ? "FusedConv2D" : "FusedMatMul";
    fused.inputs = nodes[i].inputs;
    if (bias_node >= 0) fused.inputs.push_back(nodes[bias_node].inputs[1]);
    if (residual_node >= 0) fused.inputs.push_back(residual);
    fused.attrs = nodes[i].attrs;
    fused.attrs.Set("activation", act_node >= 0 ? kActivationOps.at(nodes[act_node].op) : std::string("none"));
    readers.Fuse(nodes, {i, bias_node, residual_node, act_node}, last, std::move(fused));
  }
  readers.DropRemoved(nodes);
  return AnalyzeGraph(model, registry).status();
}

Status FuseLayerNormScaleOffset(Model& model, const OpRegistry& registry) {
  const OpDef* layer_normalize = registry.Find("LayerNormalize");
  if (layer_normalize == nullptr || layer_normalize->max_inputs < 3) return Status::Ok();
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  auto& nodes = model.graph.nodes;
  LS_ASSIGN_OR_RETURN(Readers readers, Readers::Of(model, a));
  // Input `side` of node k is a float32 row as wide as x's last axis, and its other input is
  // node `from`'s value.
  auto row_beside = [&](int k, int from, int side, int64_t d) {
    if (a.inputs[k].size() != 2 || a.inputs[k][1 - side].node != from || a.inputs[k][side].node == from) return false;
    const TensorSpec& row = a.Spec(a.inputs[k][side]);
    return row.dtype == DType::kFloat32 && row.shape.rank() == 1 && row.shape.dim(0) == d;
  };
  for (int i : a.topological_order) {
    if (nodes[i].op != "LayerNormalize" || a.inputs[i].size() != 1) continue;
    const TensorSpec& x = a.outputs[i][0];
    const int64_t d = x.shape.rank() >= 1 ? x.shape.dim(x.shape.rank() - 1) : -1;
    if (x.dtype != DType::kFloat32 || d < 0) continue;
    const int mul = readers.SoleConsumer(i);
    if (mul < 0 || nodes[mul].op != "Mul") continue;
    int scale_side = -1;
    for (int side : {1, 0}) {
      if (scale_side < 0 && row_beside(mul, i, side, d)) scale_side = side;
    }
    if (scale_side < 0) continue;
    int add = readers.SoleConsumer(mul), offset_side = -1;
    if (add >= 0 && (nodes[add].op == "BiasAdd" || nodes[add].op == "Add")) {
      for (int side : {1, 0}) {
        if (offset_side < 0 && (side == 1 || nodes[add].op == "Add") && row_beside(add, mul, side, d)) offset_side = side;
      }
    }
    if (offset_side < 0) add = -1;
    const int last = add >= 0 ? add : mul;
    NodeDef fused{nodes[last].name, "LayerNormalize", {nodes[i].inputs[0], nodes[mul].inputs[scale_side]}, nodes[i].attrs};
    if (add >= 0) fused.inputs.push_back(nodes[add].inputs[offset_side]);
    readers.Fuse(nodes, {i, mul, add}, last, std::move(fused));
  }
  readers.DropRemoved(nodes);
  return AnalyzeGraph(model, registry).status();
}

}  // namespace lockstep
