// dense (a matmul and a bias) and embedding (a table lookup of the raw features, wherever in
// the graph it takes the model's input).
#include "training/layers/layer_kind.h"
#include "training/layers/layer_ops.h"

namespace lockstep::training {
namespace {

LayerKind Dense() {
  LayerKind k{.type = "dense"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("units", l.units, 1);
    f.Get("activation", l.activation, ActivationNames());
    f.Get("initializer", l.initializer, kInitializerNames);
    f.Get("use_bias", l.use_bias);
  };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.units == 0) f.Fail("is required for a dense layer", "units");
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out.update({{"units", l.units}, {"activation", l.activation}, {"initializer", l.initializer}, {"use_bias", l.use_bias}});
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    const std::vector<int64_t>& in = p.inputs[0];
    if (in.size() != 1) {
      return InvalidArgument(p.path + ": a dense layer needs a flat input, got " + ShapeString(in) +
                             "; add a flatten layer before it");
    }
    PlannedLayer out{.shape = {p.layer.units}};
    AddDenseWeights(p.name, in[0], p.layer.units, InitializerOr(p.layer, "glorot_uniform"), out.weights,
                    p.layer.use_bias);
    return out;
  };
  k.build = [](const LayerGraph& b) { return DenseOps(b, b.inputs[0], b.name, b.node, b.layer.use_bias); };
  return k;
}

// The feature values are the ids (checked to be whole numbers in range by the trainer).
LayerKind Embedding() {
  LayerKind k{.type = "embedding"};
  k.read = [](ConfigFields& f, LayerConfig& l) {
    f.Get("vocabulary", l.vocabulary, 1);
    f.Get("dimension", l.dimension, 1);
  };
  k.check = [](ConfigFields& f, const LayerConfig& l) {
    if (l.vocabulary == 0 || l.dimension == 0) {
      f.Fail("is required for an embedding layer", l.vocabulary == 0 ? "vocabulary" : "dimension");
    }
  };
  k.write = [](const LayerConfig& l, Json& out) {
    out.update({{"vocabulary", l.vocabulary}, {"dimension", l.dimension}});
  };
  k.plan = [](const LayerPlan& p) -> StatusOr<PlannedLayer> {
    if (p.sources[0] != -1 || p.inputs[0].size() != 1) {
      return InvalidArgument(p.path +
                             ": an embedding layer takes the model's input, flat: it looks up the raw features as ids");
    }
    if (p.config.model.normalize) {
      return InvalidArgument(
          "model.normalize: must be false with an embedding layer, whose ids are looked up as they are");
    }
    PlannedLayer out{.shape = {p.inputs[0][0], p.layer.dimension}};
    out.weights.push_back({p.name + "/embeddings", Shape{p.layer.vocabulary, p.layer.dimension},
                           p.layer.vocabulary, p.layer.dimension, InitializerOr(p.layer, "glorot_uniform")});
    return out;
  };
  k.build = [](const LayerGraph& b) {
    AttrMap to_int;
    to_int.Set("dtype", DType::kInt32);
    return b.g.Op("Gather", {b.weights.Get(b.name + "/embeddings"), b.g.Op("Cast", {b.inputs[0]}, to_int, b.node + "/ids")},
                  {}, b.node);
  };
  return k;
}

}  // namespace

void AddDenseLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(Dense());
  kinds.push_back(Embedding());
}

}  // namespace lockstep::training
