#include "training/layers/layer_kind.h"

namespace lockstep::training {
namespace {

const std::vector<LayerKind>& AllKinds() {
  static const std::vector<LayerKind> kinds = [] {
    std::vector<LayerKind> k;
    AddDenseLayers(k);
    AddImageLayers(k);
    AddCoreLayers(k);
    AddNormalizationLayers(k);
    AddMergeLayers(k);
    AddTransformerLayers(k);
    return k;
  }();
  return kinds;
}

}  // namespace

const LayerKind* FindLayerKind(std::string_view type) {
  for (const LayerKind& kind : AllKinds()) {
    if (kind.type == type) return &kind;
  }
  return nullptr;
}

const std::vector<std::string_view>& LayerTypeNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n;
    for (const LayerKind& kind : AllKinds()) n.push_back(kind.type);
    return n;
  }();
  return names;
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string ALayer(std::string_view type) {
  const bool vowel = !type.empty() && std::string_view("aeiou").find(type[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(type) + " layer";
}

std::string InitializerOr(const LayerConfig& layer, const char* fallback) {
  return layer.initializer.empty() ? std::string(fallback) : layer.initializer;
}

std::string ActivationOp(const std::string& activation) {
  if (activation == "relu") return "Relu";
  if (activation == "gelu") return "Gelu";
  if (activation == "sigmoid") return "Sigmoid";
  if (activation == "tanh") return "Tanh";
  if (activation == "softmax") return "Softmax";
  if (activation == "swish") return "Silu";
  if (activation == "hard_swish") return "HardSwish";
  if (activation == "leaky_relu") return "LeakyRelu";  // the op's slope, 0.01 (PyTorch's, ONNX's)
  return "";
}

const std::vector<std::string_view>& ActivationNames() {
  static const std::vector<std::string_view> names = {
      "", "relu", "gelu", "sigmoid", "tanh", "softmax", "swish", "silu", "hard_swish", "leaky_relu"};
  return names;
}

}  // namespace lockstep::training
