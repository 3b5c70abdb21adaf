// The model as graphs. One description of the layers is emitted twice, by the same code:
//  - the training graph: features, labels, the normalisation and every weight (or its bf16
//    copy: TakesBf16Copy) come in as inputs each step; out come the loss, the logits and the loss's gradient
//    for each weight;
//  - the serving graph: the weights and the normalisation are constants; raw features come
//    in, probabilities and classes go out.
// Both forward passes come from one function, so training and serving cannot drift apart.
// Dropout is one difference: a training-only layer, left out of the serving graph. batch_norm
// is the other: the batch's statistics in training (output for its moving averages, StateInfo),
// the moving averages in serving, folded into the layer before it (batch_norm_fold.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "training/config.h"
#include "training/data/feature_stats.h"
#include "training/data/labelled_table.h"

namespace lockstep::training {

// What the model learns about the data it is given.
struct DataSchema {
  std::vector<FeatureKey> feature_keys;  // the features as the source groups them, in order
  std::vector<std::string> class_names;  // the source's class names; empty when labels are ids
  std::vector<std::string> target_names;  // regression: one per target value; else empty

  int64_t num_features() const;
  static DataSchema Of(const LabelledTable& table);
};

struct WeightInfo {
  std::string name;  // "dense_0/kernel", "conv2d_0/bias", "embedding_0/embeddings", ...
  Shape shape;
  int64_t fan_in = 0, fan_out = 0;
  std::string initializer;  // resolved: never ""
  bool product = false;     // multiplied in a matmul or convolution (a kernel)
};

// What the model keeps without learning it by gradient: batch_norm's moving averages. The
// training graph outputs the batch's statistic as StateOutput(name), and after each step the
// trainer moves the value towards it: value = momentum * value + (1 - momentum) * batch. Held
// in the WeightMap beside the weights (and so in checkpoints and the export), never an input
// of the training graph, never seen by the optimiser.
struct StateInfo {
  std::string name;  // "batch_norm_0/moving_mean"
  Shape shape;
  double momentum = 0.99;
  float initial = 0;  // the value before the first step
};

// What the layers need, worked out from the config and the data.
struct ModelLayout {
  DataSchema data;  // class_names filled in: one per class, "0", "1", ... for id labels
  int64_t num_features = 0;
  int32_t num_classes = 0;           // the last layer's outputs; labels must be below it
  bool regression = false;           // the outputs are the targets' values (num_classes of them)
  std::vector<int64_t> input_shape;  // one example as the first layer sees it
  std::vector<WeightInfo> weights;
  std::vector<StateInfo> state;
  bool has_dropout = false;  // the training graph takes kDropoutSeedInput
  // Per layer: the layers it takes (LayerInputIndices: -1 is the model's input) and its output
  // shape for one example.
  std::vector<std::vector<int>> layer_inputs;
  std::vector<std::vector<int64_t>> layer_shapes;
};

// Every tensor the model keeps, by name and shape: its weights, then its state.
std::vector<std::pair<std::string, Shape>> KeptTensors(const ModelLayout& layout);

// Fails, naming the layer and what is wrong, for a layer that does not fit what comes before
// it (a dense layer on an image, a window larger than its input, an add of two shapes, a model
// that does not end with one output per named class) or a last activation that does not go
// with the loss. The model's output is the last layer's.
// With id labels the model's outputs are the classes: the caller checks each label is below.
// For regression the model ends with one output per target value.
StatusOr<ModelLayout> PlanModel(const TrainConfig& config, const DataSchema& data);

// The training graph's names.
inline constexpr char kTrainSignature[] = "train";
inline constexpr char kFeaturesInput[] = "features";         // float32 [batch, num_features]
inline constexpr char kLabelsInput[] = "labels";             // int32 [batch]; classification
inline constexpr char kTargetsInput[] = "targets";           // float32 [batch, num_targets]; regression
inline constexpr char kMeanInput[] = "feature_mean";         // float32 [num_features]
inline constexpr char kStdInput[] = "feature_std";           // float32 [num_features]
inline constexpr char kDropoutSeedInput[] = "dropout_seed";  // int64 scalar, new each step
inline constexpr char kLossOutput[] = "loss";                // float32 scalar: the batch's mean loss
inline constexpr char kLogitsOutput[] = "logits";            // float32 [batch, num_classes]; classification
// Regression's outputs in place of the logits: the last layer's activation applied, float32
// [batch, num_targets], what the served model answers.
inline constexpr char kPredictionsOutput[] = "predictions";
inline std::string GradientOutput(const std::string& weight) {
  return "grad/" + weight;
}
// After the gradients, one per StateInfo of the layout, in its order: the batch's statistic.
inline std::string StateOutput(const std::string& state) {
  return "batch/" + state;
}

// Under precision bfloat16 the training graph takes each weight that is multiplied in a
// product as a bf16 copy, an input named Bf16CopyName(weight), instead of the float32 master:
// the copy is made once per step, by the optimiser's update (Parameter::bf16_value), and read
// by every replica, so no replica casts a weight. Its gradient is the float32 master's.
bool TakesBf16Copy(const TrainConfig& config, const WeightInfo& weight);
inline std::string Bf16CopyName(const std::string& weight) {
  return weight + "/bf16";
}

// Losses (config.loss), each of the logits and the integer labels, averaged over the batch:
//   softmax_cross_entropy  -log softmax(logits)[label]
//   sigmoid_cross_entropy  one sigmoid per class, one-vs-rest: the sum over classes of the
//                          binary cross-entropy against the one-hot label
//   mean_squared_error     the mean over classes of (output - one-hot label)^2, where the
//                          output is the last layer's activation of the logits
// and for regression, of the outputs and the targets, e = output - target, averaged over the
// targets and the batch (as Keras's losses of the same names):
//   mean_squared_error     e^2
//   mean_absolute_error    |e|
//   huber                  e^2 / 2 where |e| <= delta (config.huber_delta), else
//                          delta (|e| - delta / 2)
StatusOr<Model> BuildTrainingGraph(const TrainConfig& config, const ModelLayout& layout);

// The serving graph's names.
inline constexpr char kClassificationSignature[] = "classification";
inline constexpr char kRegressionSignature[] = "regression";

// The serving graph, with two signatures over one set of weights:
//  - "serving_default" (predict): input "x", raw features, float32 [batch, num_features];
//    outputs "probabilities" float32 [batch, num_classes] (softmax, sigmoid or the last
//    activation, as the loss has it) and "classes" int64 [batch] (the most likely);
//  - "classification" (classify, for :classify with tf.Examples): one input per feature key,
//    float32 [batch, width], named as in the training data; outputs "scores" (the
//    probabilities) and "classes", string [batch, num_classes], the class names.
// For regression instead:
//  - "serving_default" (predict): input "x"; output "outputs" float32 [batch, num_targets];
//  - "regression" (regress, for :regress with tf.Examples), when there is one target value
//    (TF Serving's regression answers one per example): the same inputs as classification's,
//    output "outputs" float32 [batch, 1].
// `weights` holds every weight and state of the layout.
StatusOr<Model> BuildServingGraph(const TrainConfig& config, const ModelLayout& layout,
                                  const WeightMap& weights, const FeatureStats& stats);

}  // namespace lockstep::training
