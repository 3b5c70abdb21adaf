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

}  // namespace

Status FuseMatMul(Model& model, const OpRegistry& registry) {
  if (registry.Find("FusedMatMul") == nullptr) return Status::Ok();
  const OpDef* fused_conv = registry.Find("FusedConv2D");
  const OpDef* fused_depthwise = registry.Find("FusedDepthwiseConv2D");
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  auto& nodes = model.graph.nodes;
  const int n = static_cast<int>(nodes.size());

  // A value may be folded into its consumer only if nothing else sees it.
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    for (ValueId v : a.inputs[i]) consumers[v.node].push_back(i);
  }
  std::vector<bool> exported(n, false);
  for (const Signature& sig : model.graph.signatures) {
    for (const TensorBinding& b : sig.outputs) {
      LS_ASSIGN_OR_RETURN(ValueId v, a.Resolve(b.tensor));
      exported[v.node] = true;
    }
  }
  // Nodes already part of a fused node (removed, or replaced by one) fuse no further.
  std::vector<bool> removed(n, false), fused_in(n, false);
  auto sole_consumer = [&](int i) -> int {
    if (exported[i] || consumers[i].size() != 1 || fused_in[consumers[i][0]]) return -1;
    return consumers[i][0];
  };

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
    for (int k : {i, bias_node, residual_node, act_node}) {
      if (k >= 0) fused_in[k] = true;
      if (k >= 0 && k != last) removed[k] = true;
    }
    nodes[last] = std::move(fused);
  }

  std::vector<NodeDef> kept;
  for (int i = 0; i < n; ++i) {
    if (!removed[i]) kept.push_back(std::move(nodes[i]));
  }
  nodes = std::move(kept);
  return AnalyzeGraph(model, registry).status();
}

}  // namespace lockstep
