#include "training/layers/layer_ops.h"

namespace lockstep::training {

void AddDenseWeights(const std::string& prefix, int64_t in, int64_t out, const std::string& initializer,
                     std::vector<WeightInfo>& weights, bool bias) {
  weights.push_back({prefix + "/kernel", Shape{in, out}, in, out, initializer, true});
  if (bias) weights.push_back({prefix + "/bias", Shape{out}, in, out, "zeros"});
}

std::string BiasOps(const LayerGraph& b, const std::string& y, const std::string& prefix, const std::string& node,
                    bool bias) {
  return bias ? b.g.Op("BiasAdd", {y, b.weights.Get(prefix + "/bias")}, {}, node + "/BiasAdd") : y;
}

std::string DenseOps(const LayerGraph& b, const std::string& x, const std::string& prefix, const std::string& node,
                     bool bias) {
  const std::string y = b.g.Op("MatMul", {x, b.weights.ForProduct(prefix + "/kernel")}, b.weights.ProductAttrs({}),
                               node + "/MatMul");
  return BiasOps(b, y, prefix, node, bias);
}

void AddNormWeights(const std::string& prefix, int64_t d, std::vector<WeightInfo>& weights) {
  weights.push_back({prefix + "/gamma", Shape{d}, d, d, "ones"});
  weights.push_back({prefix + "/beta", Shape{d}, d, d, "zeros"});
}

std::string LayerNormOps(const LayerGraph& b, const std::string& x, const std::string& prefix,
                         const std::string& node, double epsilon) {
  AttrMap attrs;
  attrs.Set("epsilon", epsilon);
  std::string y = b.g.Op("LayerNormalize", {x}, attrs, node + "/normalize");
  y = b.g.Op("Mul", {y, b.weights.Get(prefix + "/gamma")}, {}, node + "/scale");
  return b.g.Op("Add", {y, b.weights.Get(prefix + "/beta")}, {}, node + "/offset");
}

std::string ReshapeOps(const LayerGraph& b, const std::string& x, std::vector<int64_t> dims, const std::string& node) {
  AttrMap attrs;
  attrs.Set("shape", std::move(dims));
  return b.g.Op("Reshape", {x}, attrs, node);
}

std::string GroupKernelName(const std::string& layer, int64_t groups, int64_t g) {
  return groups == 1 ? layer + "/kernel" : layer + "/group_" + std::to_string(g) + "/kernel";
}

}  // namespace lockstep::training
