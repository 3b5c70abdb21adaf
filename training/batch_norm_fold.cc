#include "training/batch_norm_fold.h"

#include <algorithm>

#include "runtime/import/batch_norm.h"
#include "training/layers/layer_ops.h"

namespace lockstep::training {

std::vector<int> BatchNormFolds(const ModelConfig& model, const ModelLayout& layout) {
  const size_t n = model.layers.size();
  std::vector<int> readers(n, 0);
  for (const std::vector<int>& inputs : layout.layer_inputs) {
    for (int j : inputs) {
      if (j >= 0) ++readers[static_cast<size_t>(j)];
    }
  }
  std::vector<int> folds(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (model.layers[i].type != "batch_norm") continue;
    const int j = layout.layer_inputs[i][0];
    if (j < 0) continue;
    const LayerConfig& before = model.layers[static_cast<size_t>(j)];
    const bool linear = before.type == "conv2d" || before.type == "depthwise_conv2d" || before.type == "dense";
    if (linear && before.activation.empty() && readers[static_cast<size_t>(j)] == 1) {
      folds[i] = j;
    }
  }
  return folds;
}

StatusOr<WeightMap> ServingWeights(const ModelConfig& model, const WeightMap& weights,
                                   std::span<const int> folds) {
  WeightMap served = weights;
  auto get = [&](const std::string& name) -> StatusOr<const Tensor*> {
    auto it = weights.find(name);
    if (it == weights.end()) return InvalidArgument("no weight '" + name + "' for the serving graph");
    return &it->second;
  };
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].type != "batch_norm") continue;
    const std::string name = LayerName(model, i);
    LS_ASSIGN_OR_RETURN(const Tensor* gamma, get(name + "/gamma"));
    LS_ASSIGN_OR_RETURN(const Tensor* beta, get(name + "/beta"));
    LS_ASSIGN_OR_RETURN(const Tensor* mean, get(name + "/moving_mean"));
    LS_ASSIGN_OR_RETURN(const Tensor* variance, get(name + "/moving_variance"));
    const int64_t c = gamma->num_elements();
    LS_ASSIGN_OR_RETURN(FoldedBatchNorm f, FoldBatchNorm(*gamma, *beta, *mean, *variance, model.layers[i].epsilon,
                                                        DType::kFloat64, Shape{c}));
    const std::span<const double> s = f.scale.data<double>(), o = f.offset.data<double>();
    if (folds[i] < 0) {
      Tensor scale(DType::kFloat32, Shape{c}), offset(DType::kFloat32, Shape{c});
      for (int64_t k = 0; k < c; ++k) {
        scale.mutable_data<float>()[static_cast<size_t>(k)] = static_cast<float>(s[static_cast<size_t>(k)]);
        offset.mutable_data<float>()[static_cast<size_t>(k)] = static_cast<float>(o[static_cast<size_t>(k)]);
      }
      served[name + "/scale"] = std::move(scale);
      served[name + "/offset"] = std::move(offset);
      continue;
    }
    // The kernel's last axis (or, for depthwise_conv2d, its last two) runs over the output
    // channels: element e of group g's kernel feeds channel g * (c / groups) + e mod (c / groups).
    const LayerConfig& layer = model.layers[static_cast<size_t>(folds[i])];
    const std::string before = LayerName(model, static_cast<size_t>(folds[i]));
    const int64_t groups = layer.type == "conv2d" ? layer.groups : 1, per_group = c / groups;
    for (int64_t g = 0; g < groups; ++g) {
      const std::string name_g = GroupKernelName(before, groups, g);
      LS_ASSIGN_OR_RETURN(const Tensor* kernel, get(name_g));
      Tensor scaled(DType::kFloat32, kernel->shape());
      const std::span<const float> k = kernel->data<float>();
      for (size_t e = 0; e < k.size(); ++e) {
        const size_t channel = static_cast<size_t>(g * per_group) + e % static_cast<size_t>(per_group);
        scaled.mutable_data<float>()[e] = static_cast<float>(static_cast<double>(k[e]) * s[channel]);
      }
      served[name_g] = std::move(scaled);
    }
    Tensor bias(DType::kFloat32, Shape{c});
    auto old = weights.find(before + "/bias");
    for (int64_t ch = 0; ch < c; ++ch) {
      const auto u = static_cast<size_t>(ch);
      const double b = old != weights.end() ? static_cast<double>(old->second.data<float>()[u]) : 0.0;
      bias.mutable_data<float>()[u] = static_cast<float>(b * s[u] + o[u]);
    }
    served[before + "/bias"] = std::move(bias);
  }
  return served;
}

}  // namespace lockstep::training
