#include <set>

#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

// The ops whose products the matmul core computes and that read attr "precision".
const std::set<std::string, std::less<>> kMatMulCoreOps = {"MatMul",      "FusedMatMul",     "BatchMatMul",
                                                           "Conv2D",      "FusedConv2D",     "Conv2DTranspose"};

}  // namespace

Status UseBf16Products(Model& model, const OpRegistry& registry) {
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  for (size_t i = 0; i < model.graph.nodes.size(); ++i) {
    NodeDef& node = model.graph.nodes[i];
    if (kMatMulCoreOps.count(node.op) == 0 || node.attrs.Has("precision") || a.inputs[i].empty()) continue;
    if (a.Spec(a.inputs[i][0]).dtype != DType::kFloat32) continue;
    node.attrs.Set("precision", std::string("bfloat16"));
    // Approximate by choice: a 3x3 layer may round Winograd's transformed tiles instead of
    // its operands (conv_ops.cc's ChooseConvWay), the faster way.
    if (node.op == "Conv2D" || node.op == "FusedConv2D") node.attrs.Set("bf16_winograd", true);
  }
  return AnalyzeGraph(model, registry).status();
}

}  // namespace lockstep
