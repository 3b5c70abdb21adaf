// The model as graphs. One description of the layers is emitted twice, by the same code:
//  - the training graph: features, labels, the normalisation and every weight come in as
//    inputs each step; out come the loss, the logits and the loss's gradient for each weight;
//  - the serving graph: the weights and the normalisation are constants; raw features come
//    in, probabilities and classes go out.
// Both forward passes come from one function, so training and serving cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "training/config.h"
#include "training/data/feature_stats.h"

namespace lockstep::training {

struct WeightInfo {
  std::string name;  // "dense_0/kernel", "dense_0/bias"
  Shape shape;
  int64_t fan_in = 0, fan_out = 0;
  std::string initializer;  // resolved: never ""
};

// What the layers need, worked out from the config and the data.
struct ModelLayout {
  int64_t num_features = 0;
  int32_t num_classes = 0;
  std::vector<WeightInfo> weights;
};

// Fails, naming the layer, for a layer that does not fit what comes before it, or one
// model-train cannot train yet.
StatusOr<ModelLayout> PlanModel(const ModelConfig& model, int64_t num_features, int32_t num_classes);

// The training graph's names.
inline constexpr char kTrainSignature[] = "train";
inline constexpr char kFeaturesInput[] = "features";  // float32 [batch, num_features]
inline constexpr char kLabelsInput[] = "labels";      // int32 [batch]
inline constexpr char kMeanInput[] = "feature_mean";  // float32 [num_features]
inline constexpr char kStdInput[] = "feature_std";    // float32 [num_features]
inline constexpr char kLossOutput[] = "loss";         // float32 scalar: the batch's mean loss
inline constexpr char kLogitsOutput[] = "logits";     // float32 [batch, num_classes]
inline std::string GradientOutput(const std::string& weight) {
  return "grad/" + weight;
}

StatusOr<Model> BuildTrainingGraph(const TrainConfig& config, const ModelLayout& layout);

// The serving graph, signature "serving_default": input "x" (raw features, float32
// [batch, num_features]), outputs "probabilities" (float32 [batch, num_classes]) and "classes"
// (int64 [batch]). `weights` holds every weight of the layout.
StatusOr<Model> BuildServingGraph(const TrainConfig& config, const ModelLayout& layout,
                                  const WeightMap& weights, const FeatureStats& stats);

}  // namespace lockstep::training
