// flatten, dropout and activation: layers with no weights that keep or flatten their input.
#include <functional>
#include <numeric>

#include "training/layers/layer_kind.h"

namespace lockstep::training {
namespace {

LayerKind Flatten() {
  LayerKind k{.type = "flatten"};
  k.read = [](ConfigFields&, LayerConfig&) {};
  k.write = [](const LayerConfig&, Json&) {};
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const std::vector<int64_t>& in = p.inputs[0];
    return PlannedLayer{.shape = {std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>())}};
  };
  k.build = [](const LayerGraph& b) { return b.g.Op("Flatten", {b.inputs[0]}, {}, b.node); };
  return k;
}

// Zeroes each value with probability `rate` and scales the rest by 1 / (1 - rate), with masks
// drawn from the seed the training graph takes each step (stream: the layer's index); left out
// where there is no seed.
LayerKind Dropout() {
  LayerKind k{.type = "dropout"};
  k.read = [](ConfigFields& f, LayerConfig& l) { f.Get("rate", l.rate, 0.0, 1.0); };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.rate >= 1.0) f.Fail("must be below 1, got 1", "rate");
  };
  k.write = [](const LayerConfig& l, Json& out) { out["rate"] = l.rate; };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    return PlannedLayer{.shape = p.inputs[0], .takes_dropout_seed = p.layer.rate > 0};
  };
  k.build = [](const LayerGraph& b) {
    if (b.dropout_seed.empty() || b.layer.rate <= 0) return b.inputs[0];
    AttrMap attrs;
    attrs.Set("rate", b.layer.rate);
    attrs.Set("stream", static_cast<int64_t>(b.index));
    return b.g.Op("Mul", {b.inputs[0], b.g.Op("DropoutMask", {b.inputs[0], b.dropout_seed}, attrs, b.node + "/mask")},
                  {}, b.node);
  };
  return k;
}

// Its activation alone (applied by the caller, as every layer's).
LayerKind Activation() {
  LayerKind k{.type = "activation"};
  k.read = [](ConfigFields& f, LayerConfig& l) { f.Get("activation", l.activation, ActivationNames()); };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.activation.empty()) f.Fail("is required for an activation layer", "activation");
  };
  k.write = [](const LayerConfig& l, Json& out) { out["activation"] = l.activation; };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> { return PlannedLayer{.shape = p.inputs[0]}; };
  k.build = [](const LayerGraph& b) { return b.inputs[0]; };
  return k;
}

}  // namespace

void AddCoreLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(Flatten());
  kinds.push_back(Dropout());
  kinds.push_back(Activation());
}

}  // namespace lockstep::training
