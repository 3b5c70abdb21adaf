#include "training/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace lockstep::training {

StatusOr<Optimizer> Optimizer::Create(const OptimizerConfig& config) {
  Kind kind;
  if (config.type == "sgd") {
    kind = Kind::kSgd;
  } else if (config.type == "momentum") {
    kind = Kind::kMomentum;
  } else if (config.type == "adam") {
    kind = Kind::kAdam;
  } else if (config.type == "adamw") {
    kind = Kind::kAdamW;
  } else {
    return InvalidArgument("unknown optimizer '" + config.type + "' (sgd, momentum, adam, adamw)");
  }
  return Optimizer(kind, config);
}

void Optimizer::Apply(std::span<const Parameter> params, double learning_rate) {
  ++steps_;
  const size_t slots = kind_ == Kind::kSgd ? 0 : kind_ == Kind::kMomentum ? 1 : 2;
  if (state_.size() != params.size()) {
    state_.assign(params.size(), {});
    for (size_t p = 0; p < params.size(); ++p) {
      state_[p].assign(slots, std::vector<float>(params[p].value.size(), 0.0f));
    }
  }
  const auto lr = static_cast<float>(learning_rate);
  const auto wd = static_cast<float>(config_.weight_decay);
  // Decoupled decay (adamw) shrinks the weight itself; the others add wd w to the gradient.
  const float l2 = kind_ == Kind::kAdamW ? 0.0f : wd;
  const auto mu = static_cast<float>(config_.momentum);
  const auto b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  const auto eps = static_cast<float>(config_.epsilon);
  // Bias corrections, in double: b^t underflows float's precision within a few thousand steps.
  const auto t = static_cast<double>(steps_);
  const auto correct1 = static_cast<float>(1.0 - std::pow(config_.beta1, t));
  const auto correct2 = static_cast<float>(1.0 - std::pow(config_.beta2, t));

  for (size_t p = 0; p < params.size(); ++p) {
    std::span<float> w = params[p].value;
    std::span<const float> g = params[p].grad;
    switch (kind_) {
      case Kind::kSgd:
        for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * (g[i] + l2 * w[i]);
        break;
      case Kind::kMomentum: {
        float* v = state_[p][0].data();
        for (size_t i = 0; i < w.size(); ++i) {
          const float gi = g[i] + l2 * w[i];
          v[i] = mu * v[i] + gi;
          w[i] -= lr * (config_.nesterov ? gi + mu * v[i] : v[i]);
        }
        break;
      }
      case Kind::kAdam:
      case Kind::kAdamW: {
        float* m = state_[p][0].data();
        float* s = state_[p][1].data();
        for (size_t i = 0; i < w.size(); ++i) {
          if (kind_ == Kind::kAdamW) w[i] -= lr * wd * w[i];
          const float gi = g[i] + l2 * w[i];
          m[i] = b1 * m[i] + (1.0f - b1) * gi;
          s[i] = b2 * s[i] + (1.0f - b2) * gi * gi;
          w[i] -= lr * (m[i] / correct1) / (std::sqrt(s[i] / correct2) + eps);
        }
        break;
      }
    }
  }
}

double ScheduledLearningRate(const ScheduleConfig& schedule, double base, int64_t step, int64_t total_steps) {
  double lr = base;
  if (schedule.type == "step") {
    lr = base * std::pow(schedule.gamma, static_cast<double>(step / schedule.step_size));
  } else if (schedule.type == "cosine") {
    // From base at step 0 (after warm-up) down to min_learning_rate at the last step.
    const int64_t span = std::max<int64_t>(total_steps - schedule.warmup_steps - 1, 1);
    const double progress =
        std::clamp(static_cast<double>(step - schedule.warmup_steps) / static_cast<double>(span), 0.0, 1.0);
    lr = schedule.min_learning_rate +
         (base - schedule.min_learning_rate) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }
  if (step < schedule.warmup_steps) {
    lr *= static_cast<double>(step + 1) / static_cast<double>(schedule.warmup_steps);
  }
  return lr;
}

double ClipByGlobalNorm(std::span<const std::span<float>> grads, double max_norm) {
  double sum = 0;
  for (std::span<float> g : grads) {
    for (float x : g) sum += static_cast<double>(x) * x;
  }
  const double norm = std::sqrt(sum);
  if (max_norm > 0 && norm > max_norm) {
    const auto scale = static_cast<float>(max_norm / norm);
    for (std::span<float> g : grads) {
      for (float& x : g) x *= scale;
    }
  }
  return norm;
}

}  // namespace lockstep::training
