// layer_norm: normalises over the last axis, then a learned scale (starting at 1) and offset
// (starting at 0).
#include "training/layers/layer_kind.h"

namespace lockstep::training {
namespace {

LayerKind LayerNorm() {
  LayerKind k{.type = "layer_norm"};
  k.read = [](ConfigFields& f, LayerConfig& l) { f.Get("epsilon", l.epsilon, 0.0, 1.0, true); };
  k.write = [](const LayerConfig& l, Json& out) { out["epsilon"] = l.epsilon; };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const int64_t d = p.inputs[0].back();
    PlannedLayer out{.shape = p.inputs[0]};
    out.weights.push_back({p.name + "/gamma", Shape{d}, d, d, "ones"});
    out.weights.push_back({p.name + "/beta", Shape{d}, d, d, "zeros"});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    AttrMap attrs;
    attrs.Set("epsilon", b.layer.epsilon);
    std::string y = b.g.Op("LayerNormalize", {b.inputs[0]}, attrs, b.node + "/normalize");
    y = b.g.Op("Mul", {y, b.weights.Get(b.name + "/gamma")}, {}, b.node + "/scale");
    return b.g.Op("Add", {y, b.weights.Get(b.name + "/beta")}, {}, b.node + "/offset");
  };
  return k;
}

}  // namespace

void AddNormalizationLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(LayerNorm());
}

}  // namespace lockstep::training
