#include "training/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "training/vector_isa.h"

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

// The loops are written for the compiler to vectorise: restrict pointers, one kind per loop,
// and sqrt without errno (-fno-math-errno, training/CMakeLists.txt). They are compiled for
// AVX-512, AVX2 and the baseline (vector_isa.h): the update is bound on memory and on the
// divider, and 4 lanes leave half of it on the table. Each element's arithmetic is the
// formula's, in its order, whatever the vector width.
struct OptimizerKernels {
  [[gnu::always_inline]] static inline void Loops(Optimizer& o, const Parameter& param, size_t p,
                                                  size_t begin, size_t end) {
    const Optimizer::StepConstants& k = o.k_;
    float* __restrict w = param.value.data();
    const float* __restrict g = param.grad.data();
    switch (o.kind_) {
      case Optimizer::Kind::kSgd:
        for (size_t i = begin; i < end; ++i) w[i] -= k.lr * (g[i] + k.l2 * w[i]);
        break;
      case Optimizer::Kind::kMomentum: {
        float* __restrict v = o.state_[p][0].data();
        if (k.nesterov) {
          for (size_t i = begin; i < end; ++i) {
            const float gi = g[i] + k.l2 * w[i];
            v[i] = k.mu * v[i] + gi;
            w[i] -= k.lr * (gi + k.mu * v[i]);
          }
        } else {
          for (size_t i = begin; i < end; ++i) {
            v[i] = k.mu * v[i] + (g[i] + k.l2 * w[i]);
            w[i] -= k.lr * v[i];
          }
        }
        break;
      }
      case Optimizer::Kind::kAdam:
      case Optimizer::Kind::kAdamW: {
        float* __restrict m = o.state_[p][0].data();
        float* __restrict s = o.state_[p][1].data();
        if (o.kind_ == Optimizer::Kind::kAdamW) {
          for (size_t i = begin; i < end; ++i) w[i] -= k.lr * k.wd * w[i];
        }
        for (size_t i = begin; i < end; ++i) {
          const float gi = g[i] + k.l2 * w[i];
          m[i] = k.b1 * m[i] + (1.0f - k.b1) * gi;
          s[i] = k.b2 * s[i] + (1.0f - k.b2) * gi * gi;
          w[i] -= k.lr * (m[i] / k.correct1) / (std::sqrt(s[i] / k.correct2) + k.eps);
        }
        break;
      }
    }
  }
  __attribute__((target("avx512f"))) static void Avx512(Optimizer& o, const Parameter& param, size_t p,
                                                        size_t begin, size_t end) {
    Loops(o, param, p, begin, end);
  }
  __attribute__((target("avx2"))) static void Avx2(Optimizer& o, const Parameter& param, size_t p,
                                                   size_t begin, size_t end) {
    Loops(o, param, p, begin, end);
  }
  static void Baseline(Optimizer& o, const Parameter& param, size_t p, size_t begin, size_t end) {
    Loops(o, param, p, begin, end);
  }
};

void Optimizer::Update(const Parameter& param, size_t p, size_t begin, size_t end) {
  switch (DetectVectorIsa()) {
    case VectorIsa::kAvx512:
      return OptimizerKernels::Avx512(*this, param, p, begin, end);
    case VectorIsa::kAvx2:
      return OptimizerKernels::Avx2(*this, param, p, begin, end);
    case VectorIsa::kBaseline:
      return OptimizerKernels::Baseline(*this, param, p, begin, end);
  }
}

void Optimizer::StartStep(std::span<const Parameter> params, double learning_rate) {
  ++steps_;
  const size_t slots = kind_ == Kind::kSgd ? 0 : kind_ == Kind::kMomentum ? 1 : 2;
  if (state_.size() != params.size()) {
    state_.assign(params.size(), {});
    for (size_t p = 0; p < params.size(); ++p) {
      state_[p].assign(slots, std::vector<float>(params[p].value.size(), 0.0f));
    }
  }
  StepConstants& k = k_;
  k.lr = static_cast<float>(learning_rate);
  k.wd = static_cast<float>(config_.weight_decay);
  // Decoupled decay (adamw) shrinks the weight itself; the others add wd w to the gradient.
  k.l2 = kind_ == Kind::kAdamW ? 0.0f : k.wd;
  k.mu = static_cast<float>(config_.momentum);
  k.nesterov = config_.nesterov;
  k.b1 = static_cast<float>(config_.beta1);
  k.b2 = static_cast<float>(config_.beta2);
  k.eps = static_cast<float>(config_.epsilon);
  // Bias corrections, in double: b^t underflows float's precision within a few thousand steps.
  const auto t = static_cast<double>(steps_);
  k.correct1 = static_cast<float>(1.0 - std::pow(config_.beta1, t));
  k.correct2 = static_cast<float>(1.0 - std::pow(config_.beta2, t));
}

void Optimizer::UpdateRange(std::span<const Parameter> params, size_t p, size_t begin, size_t end) {
  const Parameter& param = params[p];
  // In stretches that stay in L1, so that the bf16 copy reads the values just written.
  constexpr size_t kStretch = 4096;
  for (size_t b = begin; b < end; b += kStretch) {
    const size_t e = std::min(end, b + kStretch);
    Update(param, p, b, e);
    if (!param.bf16_value.empty()) {
      FloatToBfloat16(param.value.subspan(b, e - b), param.bf16_value.subspan(b, e - b));
    }
  }
}

void Optimizer::Apply(std::span<const Parameter> params, double learning_rate, ThreadPool* pool) {
  StartStep(params, learning_rate);
  for (size_t p = 0; p < params.size(); ++p) {
    const size_t n = params[p].value.size();
    // Below a few tens of thousands of elements a second thread costs more than it saves.
    if (pool == nullptr || n < 32 * 1024) {
      UpdateRange(params, p, 0, n);
      continue;
    }
    pool->ParallelFor(static_cast<int64_t>(n), 16 * 1024, [&](int64_t begin, int64_t end) {
      UpdateRange(params, p, static_cast<size_t>(begin), static_cast<size_t>(end));
    });
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
