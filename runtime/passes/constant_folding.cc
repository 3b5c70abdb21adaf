#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

// Folding a node whose result is much larger than its inputs (a broadcast) would bloat the
// weights held in memory; past this many elements we leave the node to run per request.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;

bool IsConstant(const OpDef& op) { return op.name == kConstOp || op.name == kVariableOp; }

std::string UniqueWeightName(const WeightMap& weights, const std::string& base) {
  std::string name = base;
  for (int i = 1; weights.count(name) > 0; ++i) name = base + "/folded_" + std::to_string(i);
  return name;
}

}  // namespace

Status FoldConstants(Model& model, ThreadPool& pool, const OpRegistry& registry) {
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  auto& nodes = model.graph.nodes;
  std::vector<bool> constant(nodes.size(), false);
  for (int i : a.topological_order) {
    const OpDef& op = *a.ops[i];
    if (IsConstant(op)) {
      constant[i] = true;
      continue;
    }
    if (op.compute == nullptr || !op.deterministic || op.num_outputs != 1 || a.inputs[i].empty()) continue;
    bool all_constant = true;
    for (ValueId v : a.inputs[i]) all_constant = all_constant && constant[v.node];
    if (!all_constant) continue;
    int64_t out_elements = a.outputs[i][0].shape.num_elements();
    if (out_elements < 0 || out_elements > kMaxFoldedElements) continue;

    std::vector<Tensor> inputs;
    for (ValueId v : a.inputs[i]) {
      const NodeDef& producer = nodes[v.node];
      inputs.push_back(model.weights.find(std::get<std::string>(producer.attrs.values().at("weight")))->second);
    }
    auto result = RunOp(op, inputs, nodes[i].attrs, pool);
    // A kernel that rejects its constant inputs will reject them at run time too; leave the
    // node in place so that the error surfaces where the user can see which request hit it.
    if (!result.ok()) continue;
    std::string weight = UniqueWeightName(model.weights, nodes[i].name);
    model.weights[weight] = std::move((*result)[0]);
    nodes[i].op = std::string(kConstOp);
    nodes[i].inputs.clear();
    nodes[i].attrs = AttrMap{{"weight", weight}};
    constant[i] = true;
  }
  return Status::Ok();
}

}  // namespace lockstep
