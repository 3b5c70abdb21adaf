// layer_norm: normalises over the last axis, then a learned scale (starting at 1) and offset
// (starting at 0).
// batch_norm: normalises each channel (the last axis) by the batch's statistics while it
// trains, the global batch's across replicas and workers (runtime/ops/batch_norm_ops.cc), and by
// their moving averages when it serves, then the same learned scale and offset. Served, it is
// folded into the convolution or dense layer before it where it can be (batch_norm_fold.h);
// elsewhere it is one multiply and one add.
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

LayerKind BatchNorm() {
  LayerKind k{.type = "batch_norm"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("epsilon", l.epsilon, 0.0, 1.0, true);
    f.Get("momentum", l.momentum, 0.0, 1.0);
    f.Get("activation", l.activation, ActivationNames());
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out.update({{"epsilon", l.epsilon}, {"momentum", l.momentum}, {"activation", l.activation}});
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const int64_t channels = p.inputs[0].back();
    PlannedLayer out{.shape = p.inputs[0]};
    AddNormWeights(p.name, channels, out.weights);
    out.state.push_back({p.name + "/moving_mean", Shape{channels}, p.layer.momentum, 0.0f});
    out.state.push_back({p.name + "/moving_variance", Shape{channels}, p.layer.momentum, 1.0f});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    if (b.serving) {
      const std::string y = b.g.Op("Mul", {b.inputs[0], b.weights.Get(b.name + "/scale")}, {}, b.node + "/Mul");
      return b.g.Op("Add", {y, b.weights.Get(b.name + "/offset")}, {}, b.node + "/Add");
    }
    AttrMap attrs;
    attrs.Set("epsilon", b.layer.epsilon);
    const std::string y = b.g.Op(
        "BatchNormTraining", {b.inputs[0], b.weights.Get(b.name + "/gamma"), b.weights.Get(b.name + "/beta")}, attrs,
        b.node + "/BatchNorm");
    if (b.state_outputs != nullptr) {
      b.state_outputs->push_back({b.name + "/moving_mean", y + ":1"});
      b.state_outputs->push_back({b.name + "/moving_variance", y + ":2"});
    }
    return y;
  };
  return k;
}

}  // namespace

void AddNormalizationLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(LayerNorm());
  kinds.push_back(BatchNorm());
}

}  // namespace lockstep::training
