// layer_norm: normalises over the last axis, then a learned scale (starting at 1) and offset
// (starting at 0).
#include "training/layers/layer_kind.h"
#include "training/layers/layer_ops.h"

namespace lockstep::training {
namespace {

LayerKind LayerNorm() {
  LayerKind k{.type = "layer_norm"};
  k.read = [](ConfigFields& f, LayerConfig& l) { f.Get("epsilon", l.epsilon, 0.0, 1.0, true); };
  k.write = [](const LayerConfig& l, Json& out) { out["epsilon"] = l.epsilon; };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    PlannedLayer out{.shape = p.inputs[0]};
    AddNormWeights(p.name, p.inputs[0].back(), out.weights);
    return out;
  };
  k.build = [](const LayerGraph& b) { return LayerNormOps(b, b.inputs[0], b.name, b.node, b.layer.epsilon); };
  return k;
}

}  // namespace

void AddNormalizationLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(LayerNorm());
}

}  // namespace lockstep::training
