#include "training/evaluation.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace lockstep::training {
namespace {

// One example's regression loss from the served outputs and its targets (model_graph.h's
// definitions).
double RegressionExampleLoss(const TrainConfig& config, std::span<const float> outputs,
                             std::span<const float> targets) {
  double sum = 0;
  const double delta = config.huber_delta;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const double e = static_cast<double>(outputs[i]) - targets[i];
    const double a = std::abs(e);
    if (config.loss == "mean_absolute_error") {
      sum += a;
    } else if (config.loss == "huber") {
      sum += a <= delta ? 0.5 * e * e : delta * (a - 0.5 * delta);
    } else {
      sum += e * e;
    }
  }
  return sum / static_cast<double>(std::max<size_t>(outputs.size(), 1));
}

// One example's loss from the served outputs (what the training graph computes from the
// logits; here from the probabilities, clamped away from log(0)).
double ExampleLoss(const std::string& loss, std::span<const float> outputs, int32_t label) {
  auto log = [](double p) { return std::log(std::max(p, 1e-30)); };
  double sum = 0;
  for (size_t c = 0; c < outputs.size(); ++c) {
    const double target = static_cast<int32_t>(c) == label ? 1.0 : 0.0;
    const double p = outputs[c];
    if (loss == "softmax_cross_entropy") {
      sum -= target * log(p);
    } else if (loss == "sigmoid_cross_entropy") {
      sum -= target * log(p) + (1 - target) * log(1 - p);
    } else {
      sum += (p - target) * (p - target) / static_cast<double>(outputs.size());
    }
  }
  return sum;
}

}  // namespace

StatusOr<Evaluation> Evaluate(const Session& serving, const TrainConfig& config, const Part& part,
                              std::vector<float>* features, std::vector<float>* probabilities_out) {
  const int64_t f = part.table->num_features();
  constexpr int64_t kBatch = 256;
  double loss = 0, squared = 0, absolute = 0;
  int64_t correct = 0;
  std::vector<NamedTensor> in(1), out;
  for (size_t begin = 0; begin < part.rows.size(); begin += kBatch) {
    const size_t n = std::min<size_t>(kBatch, part.rows.size() - begin);
    Tensor x(DType::kFloat32, Shape{static_cast<int64_t>(n), f});
    for (size_t i = 0; i < n; ++i) {
      const auto row = part.table->row(part.rows[begin + i]);
      std::copy(row.begin(), row.end(), x.mutable_data<float>().begin() + static_cast<std::ptrdiff_t>(i) * f);
    }
    in[0] = {"x", x};
    LS_RETURN_IF_ERROR(serving.Run(kDefaultSignature, in, &out));
    const auto probabilities = out[0].tensor.data<float>();
    if (features != nullptr)
      features->insert(features->end(), x.data<float>().begin(), x.data<float>().end());
    if (probabilities_out != nullptr) {
      probabilities_out->insert(probabilities_out->end(), probabilities.begin(), probabilities.end());
    }
    const int64_t c = out[0].tensor.shape().dim(1);
    for (size_t i = 0; i < n; ++i) {
      const int64_t row = part.rows[begin + i];
      const auto outputs = probabilities.subspan(i * static_cast<size_t>(c), static_cast<size_t>(c));
      if (config.regression()) {
        const auto targets = part.table->target_row(row);
        loss += RegressionExampleLoss(config, outputs, targets);
        for (size_t t = 0; t < outputs.size(); ++t) {
          const double e = static_cast<double>(outputs[t]) - targets[t];
          squared += e * e;
          absolute += std::abs(e);
        }
        continue;
      }
      const int32_t label = part.table->labels[static_cast<size_t>(row)];
      correct += out[1].tensor.data<int64_t>()[i] == label;
      loss += ExampleLoss(config.loss, outputs, label);
    }
  }
  const auto count = static_cast<double>(std::max<size_t>(part.rows.size(), 1));
  const double values = count * static_cast<double>(std::max<int64_t>(part.table->num_targets(), 1));
  return Evaluation{static_cast<double>(correct) / count, loss / count, squared / values, absolute / values};
}

}  // namespace lockstep::training
