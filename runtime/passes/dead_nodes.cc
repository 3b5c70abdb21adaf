#include <set>

#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {

Status EliminateDeadNodes(Model& model, const OpRegistry& registry) {
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  auto& nodes = model.graph.nodes;
  std::vector<bool> live(nodes.size(), false);
  std::vector<int> stack;
  auto mark = [&](int node) {
    if (!live[node]) {
      live[node] = true;
      stack.push_back(node);
    }
  };
  for (const Signature& sig : model.graph.signatures) {
    // Inputs stay even when unused: a signature promises to accept them.
    for (const auto* list : {&sig.inputs, &sig.outputs}) {
      for (const TensorBinding& b : *list) {
        LS_ASSIGN_OR_RETURN(ValueId v, a.Resolve(b.tensor));
        mark(v.node);
      }
    }
  }
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    for (ValueId v : a.inputs[i]) mark(v.node);
  }

  std::vector<NodeDef> kept;
  std::set<std::string, std::less<>> used_weights;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    if (nodes[i].op == kConstOp || nodes[i].op == kVariableOp) {
      used_weights.insert(std::get<std::string>(nodes[i].attrs.values().at("weight")));
    }
    kept.push_back(std::move(nodes[i]));
  }
  nodes = std::move(kept);
  std::erase_if(model.weights, [&](const auto& entry) { return used_weights.count(entry.first) == 0; });
  return Status::Ok();
}

}  // namespace lockstep
