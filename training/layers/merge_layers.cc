// add, multiply and concat: layers of two or more inputs (skip connections, gates, branches).
#include "training/layers/layer_kind.h"

namespace lockstep::training {
namespace {

// The output shape: add and multiply take inputs of one shape; concat inputs of one rank that
// differ only along its axis.
StatusOr<PlannedLayer> PlanMerge(const LayerPlan& p) {
  const LayerConfig& layer = p.layer;
  const std::vector<int64_t>& first = p.inputs[0];
  std::vector<int64_t> out = first;
  const auto rank = static_cast<int64_t>(first.size());
  const bool concat = layer.type == "concat";
  const int64_t axis = layer.axis < 0 ? layer.axis + rank : layer.axis;
  if (concat && (axis < 0 || axis >= rank)) {
    return InvalidArgument(p.path + ".axis: " + std::to_string(layer.axis) + " is not an axis of its inputs " +
                           ShapeString(first));
  }
  for (size_t k = 1; k < p.inputs.size(); ++k) {
    const std::vector<int64_t>& other = p.inputs[k];
    bool fits = other.size() == first.size();
    for (int64_t d = 0; fits && d < rank; ++d) {
      const auto i = static_cast<size_t>(d);
      if (concat && d == axis) {
        out[i] += other[i];
      } else {
        fits = other[i] == first[i];
      }
    }
    if (!fits) {
      return InvalidArgument(p.path + ": " + ALayer(layer.type) + "'s inputs must have " +
                             (concat ? "one shape outside axis " + std::to_string(layer.axis) : std::string("one shape")) +
                             ", got " + ShapeString(first) + " and " + ShapeString(other) + " (inputs[0] and inputs[" +
                             std::to_string(k) + "])");
    }
  }
  return PlannedLayer{.shape = out};
}

// Summed (or multiplied) in the order the layer lists its inputs.
template <const char* kOp>
std::string BuildChain(const LayerGraph& b) {
  std::string y = b.inputs[0];
  for (size_t k = 1; k < b.inputs.size(); ++k) {
    y = b.g.Op(kOp, {y, b.inputs[k]}, {}, b.node + (k + 1 == b.inputs.size() ? "" : "/" + std::to_string(k)));
  }
  return y;
}

constexpr char kAdd[] = "Add";
constexpr char kMul[] = "Mul";

LayerKind Merge(std::string_view type, std::string (*build)(const LayerGraph&)) {
  LayerKind k{.type = type, .min_inputs = 2, .max_inputs = -1};
  k.read = [](ConfigFields&, LayerConfig&) {};
  k.write = [](const LayerConfig&, Json&) {};
  k.plan = PlanMerge;
  k.build = build;
  return k;
}

}  // namespace

void AddMergeLayers(std::vector<LayerKind>& kinds) {
  kinds.push_back(Merge("add", BuildChain<kAdd>));
  kinds.push_back(Merge("multiply", BuildChain<kMul>));
  LayerKind concat = Merge("concat", [](const LayerGraph& b) {
    AttrMap attrs;
    attrs.Set("axis", b.layer.axis < 0 ? b.layer.axis : b.layer.axis + 1);  // past the batch axis
    return b.g.Op("Concat", b.inputs, attrs, b.node);
  });
  concat.read = [](ConfigFields& f, LayerConfig& l) { f.Get("axis", l.axis, -8, 8); };
  concat.write = [](const LayerConfig& l, Json& out) { out["axis"] = l.axis; };
  kinds.push_back(concat);
}

}  // namespace lockstep::training
