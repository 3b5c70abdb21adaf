// batch_norm as the serving graph computes it. With its moving averages fixed, a batch_norm is
// y = x * s + o per channel, s = gamma / sqrt(moving_variance + epsilon) and
// o = beta - moving_mean * s (in float64, as the importers fold ONNX's and TensorFlow's:
// runtime/import/batch_norm.h). After a convolution or dense layer that nothing else reads,
// that multiply and add fold into the layer's own kernel and bias: no op of its own is left.
// The trainer evaluates through that same serving graph, so what it reports is what is served.
#pragma once

#include <span>
#include <vector>

#include "runtime/status.h"
#include "training/model_graph.h"

namespace lockstep::training {

// Per layer: for a batch_norm that folds into the layer it takes (a conv2d, depthwise_conv2d
// or dense layer with no activation, whose output nothing else takes), that layer's index;
// -1 for every other layer.
std::vector<int> BatchNormFolds(const ModelConfig& model, const ModelLayout& layout);

// The weights the serving graph holds: `weights` (every weight and state of the layout) with,
// for each batch_norm, either the layer it folds into holding kernel * s and bias * s + o (o
// alone when that layer has no bias), or "<name>/scale" and "<name>/offset" holding s and o.
StatusOr<WeightMap> ServingWeights(const ModelConfig& model, const WeightMap& weights,
                                   std::span<const int> folds);

}  // namespace lockstep::training
