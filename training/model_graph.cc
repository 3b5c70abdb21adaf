#include "training/model_graph.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "runtime/autodiff/gradients.h"
#include "runtime/graph_builder.h"
#include "training/batch_norm_fold.h"
#include "training/layers/layer_kind.h"

namespace lockstep::training {
namespace {

std::string LayerPath(size_t i) {
  return "model.layers[" + std::to_string(i) + "]";
}

// The op that turns the logits into what the model serves: the loss's own link for the
// cross-entropies, the last layer's activation for mean squared error ("" for none).
std::string OutputOp(const TrainConfig& config) {
  if (config.loss == "softmax_cross_entropy") return "Softmax";
  if (config.loss == "sigmoid_cross_entropy") return "Sigmoid";
  return ActivationOp(config.model.layers.back().activation);
}

// Which graph Forward builds: the training graph's (its batch_norm layers' statistics added to
// `state_outputs`), or the serving graph's (`folds`, BatchNormFolds: each batch_norm computed by
// its moving averages, folded into the layer before it where it can be).
struct ForwardMode {
  const std::vector<int>* folds = nullptr;  // set: serving
  std::vector<std::pair<std::string, std::string>>* state_outputs = nullptr;
};

// The layers on `x` ([batch, num_features]), up to the logits: the last layer's activation is
// left to the caller (the loss and the serving graph apply it themselves). Dropout layers are
// applied when `dropout_seed` names the seed, left out when it is empty. Node names start with
// `prefix`. The one forward pass every graph is made of.
std::string Forward(GraphBuilder& g, std::string x, const TrainConfig& config, const ModelLayout& layout,
                    WeightNodes& weight, const std::string& dropout_seed, const std::string& prefix,
                    const ForwardMode& mode) {
  const ModelConfig& model = config.model;
  if (layout.input_shape.size() > 1) {
    std::vector<int64_t> shape = {-1};
    shape.insert(shape.end(), layout.input_shape.begin(), layout.input_shape.end());
    AttrMap attrs;
    attrs.Set("shape", shape);
    x = g.Op("Reshape", {x}, attrs, prefix + "input_shape");
  }
  std::vector<std::string> outputs(model.layers.size());
  std::vector<int> folded_into(model.layers.size(), -1);  // per layer: the batch_norm folded into it
  for (size_t i = 0; mode.folds != nullptr && i < mode.folds->size(); ++i) {
    if (const int j = (*mode.folds)[i]; j >= 0) folded_into[static_cast<size_t>(j)] = static_cast<int>(i);
  }
  for (size_t i = 0; i < model.layers.size(); ++i) {
    LayerConfig biased;  // a layer that takes a batch_norm's fold has a bias, the fold's offset
    if (folded_into[i] >= 0) {
      biased = model.layers[i];
      biased.use_bias = true;
    }
    const LayerConfig& layer = folded_into[i] >= 0 ? biased : model.layers[i];
    const std::string name = LayerName(model, i);
    LayerGraph b{.g = g, .layer = layer, .index = i, .name = name, .node = prefix + name, .weights = weight,
                 .dropout_seed = dropout_seed, .serving = mode.folds != nullptr, .state_outputs = mode.state_outputs};
    for (int j : layout.layer_inputs[i]) {
      b.inputs.push_back(j < 0 ? x : outputs[static_cast<size_t>(j)]);
      b.input_shapes.push_back(j < 0 ? layout.input_shape : layout.layer_shapes[static_cast<size_t>(j)]);
    }
    const bool folded = mode.folds != nullptr && (*mode.folds)[i] >= 0;
    std::string y = folded ? b.inputs[0] : FindLayerKind(layer.type)->build(b);
    const bool last = i + 1 == model.layers.size();
    if (const std::string op = ActivationOp(layer.activation); !op.empty() && !last) {
      y = g.Op(op, {y}, {}, b.node + "/" + op);
    }
    outputs[i] = y;
  }
  return outputs.back();
}

// The normalisation at the front of a graph, when the config asks for it.
std::string Normalized(GraphBuilder& g, const std::string& x, const TrainConfig& config,
                       const std::string& mean, const std::string& std, const std::string& name) {
  if (!config.model.normalize) return x;
  return g.Op("Normalize", {x, mean, std}, {}, name);
}

// Regression's per-example loss of the logits against `targets` [batch, num_targets]; sets
// `predictions` to the outputs the loss compares (the last layer's activation applied).
// |e| is Relu(e) + Relu(-e), and min(|e|, delta) is delta - Relu(delta - |e|): ops whose
// gradients the runtime has, with Keras's choice at the kinks (a zero gradient at e = 0).
StatusOr<std::string> RegressionLoss(GraphBuilder& g, const TrainConfig& config, const std::string& logits,
                                     const std::string& targets, std::string& predictions) {
  predictions = logits;
  if (const std::string op = OutputOp(config); !op.empty()) predictions = g.Op(op, {logits}, {}, "loss/outputs");
  AttrMap per_row;
  per_row.Set("axes", std::vector<int64_t>{1});
  const std::string error = g.Op("Sub", {predictions, targets}, {}, "loss/error");
  if (config.loss == "mean_squared_error") {
    return g.Op("Mean", {g.Op("Mul", {error, error}, {}, "loss/squared")}, per_row, "loss/per_example");
  }
  const std::string absolute =
      g.Op("Add",
           {g.Op("Relu", {error}, {}, "loss/above"),
            g.Op("Relu", {g.Op("Sub", {targets, predictions}, {}, "loss/negated")}, {}, "loss/below")},
           {}, "loss/absolute");
  if (config.loss == "mean_absolute_error") return g.Op("Mean", {absolute}, per_row, "loss/per_example");
  if (config.loss != "huber") return InvalidArgument("loss: '" + config.loss + "' is not a regression loss");
  const auto delta_value = static_cast<float>(config.huber_delta);
  const std::string delta = g.Const("loss/delta", Tensor::Scalar<float>(delta_value));
  const std::string half = g.Const("loss/half", Tensor::Scalar<float>(0.5f));
  const std::string quadratic =
      g.Op("Sub", {delta, g.Op("Relu", {g.Op("Sub", {delta, absolute}, {}, "loss/delta_minus_absolute")}, {}, "loss/short_of_delta")}, {},
           "loss/quadratic");  // min(|e|, delta)
  const std::string linear = g.Op("Sub", {absolute, quadratic}, {}, "loss/linear");
  const std::string huber =
      g.Op("Add",
           {g.Op("Mul", {half, g.Op("Mul", {quadratic, quadratic}, {}, "loss/quadratic_squared")}, {},
                 "loss/quadratic_half"),
            g.Op("Mul", {delta, linear}, {}, "loss/linear_scaled")},
           {}, "loss/huber");
  return g.Op("Mean", {huber}, per_row, "loss/per_example");
}

}  // namespace

std::vector<std::pair<std::string, Shape>> KeptTensors(const ModelLayout& layout) {
  std::vector<std::pair<std::string, Shape>> kept;
  for (const WeightInfo& w : layout.weights) kept.emplace_back(w.name, w.shape);
  for (const StateInfo& s : layout.state) kept.emplace_back(s.name, s.shape);
  return kept;
}

bool TakesBf16Copy(const TrainConfig& config, const WeightInfo& weight) {
  return weight.product && config.precision == "bfloat16";
}

int64_t DataSchema::num_features() const {
  int64_t n = 0;
  for (const FeatureKey& k : feature_keys) n += k.width;
  return n;
}

DataSchema DataSchema::Of(const LabelledTable& table) {
  return DataSchema{table.feature_keys, table.class_names, table.target_names};
}

StatusOr<ModelLayout> PlanModel(const TrainConfig& config, const DataSchema& data) {
  const ModelConfig& model = config.model;
  ModelLayout layout;
  layout.data = data;
  layout.num_features = data.num_features();
  layout.input_shape =
      model.input_shape.empty() ? std::vector<int64_t>{layout.num_features} : model.input_shape;
  const int64_t elements = std::accumulate(layout.input_shape.begin(), layout.input_shape.end(), int64_t{1},
                                           std::multiplies<>());
  if (elements != layout.num_features) {
    return InvalidArgument("model.input_shape: " + ShapeString(layout.input_shape) + " holds " +
                           std::to_string(elements) + " values, but the data has " +
                           std::to_string(layout.num_features) + " features");
  }
  LS_ASSIGN_OR_RETURN(layout.layer_inputs, LayerInputIndices(model));
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& layer = model.layers[i];
    LayerPlan p{.config = config, .layer = layer, .index = i, .name = LayerName(model, i), .path = LayerPath(i)};
    for (int j : layout.layer_inputs[i]) {
      p.inputs.push_back(j < 0 ? layout.input_shape : layout.layer_shapes[static_cast<size_t>(j)]);
      p.sources.push_back(j);
    }
    LS_ASSIGN_OR_RETURN(PlannedLayer planned, FindLayerKind(layer.type)->plan(p));
    if (layer.activation == "softmax" && i + 1 != model.layers.size()) {
      return InvalidArgument(p.path + ": softmax only as the last layer's activation");
    }
    layout.weights.insert(layout.weights.end(), planned.weights.begin(), planned.weights.end());
    layout.state.insert(layout.state.end(), planned.state.begin(), planned.state.end());
    layout.has_dropout = layout.has_dropout || planned.takes_dropout_seed;
    layout.layer_shapes.push_back(planned.shape);
  }
  const std::vector<int64_t>& shape = layout.layer_shapes.back();
  const size_t last = model.layers.size() - 1;
  layout.regression = config.regression();
  if (layout.regression) {
    const auto targets = static_cast<int64_t>(data.target_names.size());
    if (targets == 0) return InvalidArgument("data.targets: task regression needs at least one target");
    if (shape.size() != 1 || shape[0] != targets) {
      return InvalidArgument(LayerPath(last) + ": the model ends with outputs " + ShapeString(shape) +
                             ", but the data has " + std::to_string(targets) + " target value" +
                             (targets == 1 ? "" : "s") + ": end with a dense layer of " + std::to_string(targets) +
                             " units");
    }
    if (model.layers[last].activation == "softmax") {
      return InvalidArgument(LayerPath(last) + ": activation \"softmax\" does not go with task regression");
    }
    layout.num_classes = static_cast<int32_t>(targets);
    return layout;
  }
  const auto named = static_cast<int64_t>(data.class_names.size());
  if (shape.size() != 1 || (named > 0 && shape[0] != named)) {
    return InvalidArgument(LayerPath(last) + ": the model ends with outputs " + ShapeString(shape) +
                           (named > 0 ? ", but the data has " + std::to_string(named) + " classes"
                                      : ", not one output per class"));
  }
  if (shape[0] > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(LayerPath(last) + ": " + std::to_string(shape[0]) +
                           " outputs are too many classes");
  }
  layout.num_classes = static_cast<int32_t>(shape[0]);
  for (int32_t c = static_cast<int32_t>(named); c < layout.num_classes; ++c) {
    layout.data.class_names.push_back(std::to_string(c));
  }
  const std::string& activation = model.layers[last].activation;
  if (config.loss == "softmax_cross_entropy" && !activation.empty() && activation != "softmax") {
    return InvalidArgument(LayerPath(last) + ": activation \"" + activation +
                           "\" does not go with loss softmax_cross_entropy, which applies softmax itself "
                           "(use \"softmax\" or none)");
  }
  if (config.loss == "sigmoid_cross_entropy" && !activation.empty() && activation != "sigmoid") {
    return InvalidArgument(LayerPath(last) + ": activation \"" + activation +
                           "\" does not go with loss sigmoid_cross_entropy, which applies a sigmoid itself "
                           "(use \"sigmoid\" or none)");
  }
  return layout;
}

StatusOr<Model> BuildTrainingGraph(const TrainConfig& config, const ModelLayout& layout) {
  GraphBuilder g;
  const int64_t f = layout.num_features;
  const int64_t classes = layout.num_classes;
  Signature sig;
  sig.name = kTrainSignature;
  auto input = [&](const std::string& name, DType dtype, const Shape& shape) {
    const std::string ref = g.Input(name, dtype, shape);
    sig.inputs.push_back({name, ref, dtype, shape});
    return ref;
  };
  std::string x = input(kFeaturesInput, DType::kFloat32, Shape{-1, f});
  const std::string labels = layout.regression ? input(kTargetsInput, DType::kFloat32, Shape{-1, classes})
                                               : input(kLabelsInput, DType::kInt32, Shape{-1});
  if (config.model.normalize) {
    const std::string mean = input(kMeanInput, DType::kFloat32, Shape{f});
    const std::string std = input(kStdInput, DType::kFloat32, Shape{f});
    x = Normalized(g, x, config, mean, std, "normalize");
  }
  const std::string seed = layout.has_dropout ? input(kDropoutSeedInput, DType::kInt64, Shape{}) : "";
  std::vector<std::string> weight_refs;
  for (const WeightInfo& w : layout.weights) {
    weight_refs.push_back(TakesBf16Copy(config, w) ? input(Bf16CopyName(w.name), DType::kBFloat16, w.shape)
                                                   : input(w.name, DType::kFloat32, w.shape));
  }
  WeightNodes weight(
      g, [](const std::string& name) { return name; },
      config.precision == "bfloat16" ? WeightNodes::Bf16::kInputs : WeightNodes::Bf16::kNone);
  std::vector<std::pair<std::string, std::string>> state_outputs;
  const std::string logits = Forward(g, x, config, layout, weight, seed, "", {.state_outputs = &state_outputs});

  std::string per_example;
  std::string predictions;  // regression's outputs
  if (layout.regression) {
    LS_ASSIGN_OR_RETURN(per_example, RegressionLoss(g, config, logits, labels, predictions));
  } else if (config.loss == "softmax_cross_entropy") {
    per_example = g.Op("SoftmaxCrossEntropy", {logits, labels}, {}, "loss/per_example");
    if (const double e = config.label_smoothing; e > 0) {
      // Targets 1 - e on the label and e / K on every class: (1 - e) (-log p_label) + e mean_k(-log p_k).
      AttrMap per_row;
      per_row.Set("axes", std::vector<int64_t>{1});
      const std::string mean_log = g.Op("Mean", {g.Op("LogSoftmax", {logits}, {}, "loss/log_probabilities")}, per_row,
                                        "loss/mean_log_probability");
      per_example = g.Op(
          "Sub",
          {g.Op("Mul", {g.Const("loss/label_share", Tensor::Scalar<float>(static_cast<float>(1 - e))), per_example}, {},
                "loss/label_part"),
           g.Op("Mul", {g.Const("loss/smoothing", Tensor::Scalar<float>(static_cast<float>(e))), mean_log}, {},
                "loss/uniform_part")},
          {}, "loss/smoothed");
    }
  } else {
    AttrMap depth;
    depth.Set("depth", classes);
    std::string targets = g.Op("OneHot", {labels}, depth, "loss/targets");
    AttrMap per_row;
    per_row.Set("axes", std::vector<int64_t>{1});
    if (config.loss == "sigmoid_cross_entropy") {
      if (const double e = config.label_smoothing; e > 0) {  // 1 - e / 2 and e / 2
        targets = g.Op("Add",
                       {g.Op("Mul", {targets, g.Const("loss/target_share", Tensor::Scalar<float>(static_cast<float>(1 - e)))},
                             {}, "loss/targets_scaled"),
                        g.Const("loss/smoothing", Tensor::Scalar<float>(static_cast<float>(e / 2)))},
                       {}, "loss/targets_smoothed");
      }
      per_example = g.Op("Sum", {g.Op("SigmoidCrossEntropy", {logits, targets}, {}, "loss/per_class")},
                         per_row, "loss/per_example");
    } else if (config.loss == "mean_squared_error") {
      std::string out = logits;
      if (const std::string op = OutputOp(config); !op.empty()) out = g.Op(op, {logits}, {}, "loss/outputs");
      const std::string error = g.Op("Sub", {out, targets}, {}, "loss/error");
      per_example =
          g.Op("Mean", {g.Op("Mul", {error, error}, {}, "loss/squared")}, per_row, "loss/per_example");
    } else {
      return InvalidArgument("loss: unknown loss '" + config.loss + "'");
    }
  }
  const std::string loss = g.Op("Mean", {per_example}, {}, "loss/mean");
  sig.outputs.push_back({kLossOutput, loss, DType::kFloat32, Shape{}});
  if (layout.regression) {
    sig.outputs.push_back({kPredictionsOutput, predictions, DType::kFloat32, Shape{-1, classes}});
  } else {
    sig.outputs.push_back({kLogitsOutput, logits, DType::kFloat32, Shape{-1, classes}});
  }
  g.AddSignature(sig);
  Model model = std::move(g).Build();
  LS_ASSIGN_OR_RETURN(std::vector<std::string> grads, AddGradients(model, loss, weight_refs));
  for (size_t i = 0; i < grads.size(); ++i) {
    const WeightInfo& w = layout.weights[i];
    model.graph.signatures[0].outputs.push_back({GradientOutput(w.name), grads[i], DType::kFloat32, w.shape});
  }
  for (const StateInfo& s : layout.state) {
    auto it = std::find_if(state_outputs.begin(), state_outputs.end(), [&](const auto& o) { return o.first == s.name; });
    if (it == state_outputs.end()) return Internal("no batch statistic for '" + s.name + "' in the training graph");
    model.graph.signatures[0].outputs.push_back({StateOutput(s.name), it->second, DType::kFloat32, s.shape});
  }
  return model;
}

StatusOr<Model> BuildServingGraph(const TrainConfig& config, const ModelLayout& layout,
                                  const WeightMap& weights, const FeatureStats& stats) {
  GraphBuilder g;
  const int64_t f = layout.num_features;
  const int64_t classes = layout.num_classes;
  const std::vector<int> folds = BatchNormFolds(config.model, layout);
  LS_ASSIGN_OR_RETURN(const WeightMap served, ServingWeights(config.model, weights, folds));
  Status missing;
  std::map<std::string, std::string> consts;  // weight -> its Const node, shared by both signatures
  WeightNodes weight(
      g,
      [&](const std::string& name) {
        if (auto it = consts.find(name); it != consts.end()) return it->second;
        auto it = served.find(name);
        if (it == served.end()) {
          if (missing.ok()) missing = InvalidArgument("no weight '" + name + "' for the serving graph");
          return consts[name] = g.Const(name, Tensor(DType::kFloat32, Shape{0}));
        }
        return consts[name] = g.Const(name, it->second);
      },
      config.precision == "bfloat16" ? WeightNodes::Bf16::kCasts : WeightNodes::Bf16::kNone);
  std::string mean, std;
  if (config.model.normalize) {
    mean = g.Const("feature_mean", Tensor::FromVector<float>(Shape{f}, stats.mean));
    std = g.Const("feature_std", Tensor::FromVector<float>(Shape{f}, stats.std));
  }
  const std::string output_op = OutputOp(config);
  // Raw features [batch, f] -> (logits, probabilities), node names starting with `prefix`.
  auto head = [&](const std::string& raw, const std::string& prefix) {
    const std::string x = Normalized(g, raw, config, mean, std, prefix + "normalize");
    const std::string logits = Forward(g, x, config, layout, weight, "", prefix, {.folds = &folds});
    return std::pair{
        logits, g.Op(output_op.empty() ? "Identity" : output_op, {logits}, {},
                     prefix + (layout.regression ? "outputs" : "probabilities"))};
  };

  const std::string raw = g.Input("x", DType::kFloat32, Shape{-1, f});
  const auto [logits, probabilities] = head(raw, "");
  Signature predict;
  predict.name = std::string(kDefaultSignature);
  predict.method_name = "tensorflow/serving/predict";
  predict.inputs.push_back({"x", raw, DType::kFloat32, Shape{-1, f}});
  if (layout.regression) {
    predict.outputs.push_back({"outputs", probabilities, DType::kFloat32, Shape{-1, classes}});
  } else {
    const std::string classes_out = g.Op("ArgMax", {logits}, {}, "classes");
    predict.outputs.push_back({"probabilities", probabilities, DType::kFloat32, Shape{-1, classes}});
    predict.outputs.push_back({"classes", classes_out, DType::kInt64, Shape{-1}});
  }
  g.AddSignature(predict);

  // The classification and regression signatures take each feature key of the training data
  // as an input and join them in the training order, then run the same layers on the same
  // weights. TF Serving's regression answers one value per example: no regression signature
  // for several targets (predict serves them).
  if (layout.regression && classes != 1) {
    if (!missing.ok()) return missing;
    return std::move(g).Build();
  }
  const std::string prefix = layout.regression ? "regression/" : "classification/";
  Signature examples;
  examples.name = layout.regression ? kRegressionSignature : kClassificationSignature;
  examples.method_name = layout.regression ? "tensorflow/serving/regress" : "tensorflow/serving/classify";
  std::vector<std::string> parts;
  for (size_t i = 0; i < layout.data.feature_keys.size(); ++i) {
    const FeatureKey& key = layout.data.feature_keys[i];
    parts.push_back(g.Input(prefix + "input_" + std::to_string(i), DType::kFloat32, Shape{-1, key.width}));
    examples.inputs.push_back({key.name, parts.back(), DType::kFloat32, Shape{-1, key.width}});
  }
  AttrMap axis1;
  axis1.Set("axis", int64_t{1});
  const std::string scores = head(g.Op("Concat", parts, axis1, prefix + "features"), prefix).second;
  if (layout.regression) {
    examples.outputs.push_back({"outputs", scores, DType::kFloat32, Shape{-1, 1}});
  } else {
    const std::string names =
        g.Const("class_names", Tensor::FromVector<std::string>(Shape{1, classes}, layout.data.class_names));
    examples.outputs.push_back({"scores", scores, DType::kFloat32, Shape{-1, classes}});
    examples.outputs.push_back({"classes", g.Op("BroadcastLike", {names, scores}, {}, prefix + "classes"),
                                DType::kString, Shape{-1, classes}});
  }
  g.AddSignature(examples);
  if (!missing.ok()) return missing;
  return std::move(g).Build();
}

}  // namespace lockstep::training
