#include "training/model_graph.h"

#include <functional>

#include "runtime/autodiff/gradients.h"
#include "runtime/graph_builder.h"

namespace lockstep::training {
namespace {

std::string LayerPath(size_t i) {
  return "model.layers[" + std::to_string(i) + "]";
}

std::string LayerName(const LayerConfig& layer, size_t i) {
  return layer.type + "_" + std::to_string(i);
}

// The op of an activation name ("" for none).
std::string ActivationOp(const std::string& activation) {
  if (activation == "relu") return "Relu";
  if (activation == "gelu") return "Gelu";
  if (activation == "sigmoid") return "Sigmoid";
  if (activation == "tanh") return "Tanh";
  if (activation == "softmax") return "Softmax";
  return "";
}

using WeightRef = std::function<std::string(const std::string&)>;

// The layers on `x` ([batch, num_features]), up to the logits: a softmax on the last layer is
// left out here (the loss and the serving graph apply it themselves). The one forward pass
// both graphs are made of.
std::string Forward(GraphBuilder& g, std::string x, const ModelConfig& model, const WeightRef& weight) {
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& layer = model.layers[i];
    const std::string name = LayerName(layer, i);
    const bool last = i + 1 == model.layers.size();
    std::string activation = layer.activation;
    if (last && activation == "softmax") activation.clear();
    if (layer.type == "dense") {
      x = g.Op("MatMul", {x, weight(name + "/kernel")}, {}, name + "/MatMul");
      x = g.Op("BiasAdd", {x, weight(name + "/bias")}, {}, name + "/BiasAdd");
    } else if (layer.type == "flatten") {
      x = g.Op("Flatten", {x}, {}, name);
    }
    if (const std::string op = ActivationOp(activation); !op.empty()) x = g.Op(op, {x}, {}, name + "/" + op);
  }
  return x;
}

}  // namespace

StatusOr<ModelLayout> PlanModel(const ModelConfig& model, int64_t num_features, int32_t num_classes) {
  if (!model.input_shape.empty()) {
    int64_t n = 1;
    for (int64_t d : model.input_shape) n *= d;
    if (n != num_features || model.input_shape.size() != 1) {
      return Unimplemented("model.input_shape: only a flat input of the " + std::to_string(num_features) +
                           " features can be trained yet");
    }
  }
  ModelLayout layout;
  layout.num_features = num_features;
  layout.num_classes = num_classes;
  int64_t width = num_features;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& layer = model.layers[i];
    const std::string name = LayerName(layer, i);
    if (layer.type == "dense") {
      const std::string init = layer.initializer.empty() ? "glorot_uniform" : layer.initializer;
      layout.weights.push_back({name + "/kernel", Shape{width, layer.units}, width, layer.units, init});
      layout.weights.push_back({name + "/bias", Shape{layer.units}, width, layer.units, "zeros"});
      width = layer.units;
    } else if (layer.type == "activation" || layer.type == "flatten") {
      // Shape-preserving on a flat input.
    } else {
      return Unimplemented(LayerPath(i) + ": a " + layer.type + " layer cannot be trained yet");
    }
    if (layer.activation == "softmax" && i + 1 != model.layers.size()) {
      return InvalidArgument(LayerPath(i) + ": softmax only as the last layer's activation");
    }
  }
  if (width != num_classes) {
    return InvalidArgument(LayerPath(model.layers.size() - 1) + ": the model ends with " +
                           std::to_string(width) + " outputs, but the data has " +
                           std::to_string(num_classes) + " classes");
  }
  return layout;
}

StatusOr<Model> BuildTrainingGraph(const TrainConfig& config, const ModelLayout& layout) {
  if (config.loss != "softmax_cross_entropy") {
    return Unimplemented("loss: " + config.loss + " cannot be trained yet");
  }
  GraphBuilder g;
  const int64_t f = layout.num_features;
  Signature sig;
  sig.name = kTrainSignature;
  auto input = [&](const std::string& name, DType dtype, const Shape& shape) {
    const std::string ref = g.Input(name, dtype, shape);
    sig.inputs.push_back({name, ref, dtype, shape});
    return ref;
  };
  std::string x = input(kFeaturesInput, DType::kFloat32, Shape{-1, f});
  const std::string labels = input(kLabelsInput, DType::kInt32, Shape{-1});
  if (config.model.normalize) {
    const std::string mean = input(kMeanInput, DType::kFloat32, Shape{f});
    const std::string std = input(kStdInput, DType::kFloat32, Shape{f});
    x = g.Op("Normalize", {x, mean, std}, {}, "normalize");
  }
  std::vector<std::string> weight_refs;
  for (const WeightInfo& w : layout.weights) weight_refs.push_back(input(w.name, DType::kFloat32, w.shape));
  const std::string logits = Forward(g, x, config.model, [&](const std::string& name) { return name; });
  const std::string loss =
      g.Op("Mean", {g.Op("SoftmaxCrossEntropy", {logits, labels}, {}, "loss/per_example")}, {}, "loss/mean");
  sig.outputs.push_back({kLossOutput, loss, DType::kFloat32, Shape{}});
  sig.outputs.push_back({kLogitsOutput, logits, DType::kFloat32, Shape{-1, layout.num_classes}});
  g.AddSignature(sig);
  Model model = std::move(g).Build();
  LS_ASSIGN_OR_RETURN(std::vector<std::string> grads, AddGradients(model, loss, weight_refs));
  for (size_t i = 0; i < grads.size(); ++i) {
    const WeightInfo& w = layout.weights[i];
    model.graph.signatures[0].outputs.push_back({GradientOutput(w.name), grads[i], DType::kFloat32, w.shape});
  }
  return model;
}

StatusOr<Model> BuildServingGraph(const TrainConfig& config, const ModelLayout& layout,
                                  const WeightMap& weights, const FeatureStats& stats) {
  GraphBuilder g;
  const int64_t f = layout.num_features;
  const std::string raw = g.Input("x", DType::kFloat32, Shape{-1, f});
  std::string x = raw;
  if (config.model.normalize) {
    x = g.Op("Normalize",
             {x, g.Const("feature_mean", Tensor::FromVector<float>(Shape{f}, stats.mean)),
              g.Const("feature_std", Tensor::FromVector<float>(Shape{f}, stats.std))},
             {}, "normalize");
  }
  Status missing;
  const std::string logits = Forward(g, x, config.model, [&](const std::string& name) {
    auto it = weights.find(name);
    if (it == weights.end()) {
      if (missing.ok()) missing = InvalidArgument("no weight '" + name + "' for the serving graph");
      return g.Const(name, Tensor(DType::kFloat32, Shape{0}));
    }
    return g.Const(name, it->second);
  });
  if (!missing.ok()) return missing;
  const std::string probabilities = g.Op("Softmax", {logits}, {}, "probabilities");
  const std::string classes = g.Op("ArgMax", {logits}, {}, "classes");
  Signature sig;
  sig.name = std::string(kDefaultSignature);
  sig.method_name = "tensorflow/serving/predict";
  sig.inputs.push_back({"x", raw, DType::kFloat32, Shape{-1, f}});
  sig.outputs.push_back({"probabilities", probabilities, DType::kFloat32, Shape{-1, layout.num_classes}});
  sig.outputs.push_back({"classes", classes, DType::kInt64, Shape{-1}});
  g.AddSignature(sig);
  return std::move(g).Build();
}

}  // namespace lockstep::training
