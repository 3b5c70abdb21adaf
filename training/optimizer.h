// Optimisers: how a step's gradients change the float32 master weights. SGD, SGD with momentum
// (optionally Nesterov), Adam and AdamW; L2 or decoupled weight decay; clipping by the global
// norm; learning-rate schedules with linear warm-up. Updates run element by element in a fixed
// order on float32 state, so replicas that apply the same gradients stay bit-identical.
//
// The formulas, for a weight w, its gradient g and step t (1-based):
//   sgd:       g' = g + wd w;                 w -= lr g'
//   momentum:  g' = g + wd w;  v = mu v + g';  w -= lr v              (PyTorch's form)
//              nesterov:                       w -= lr (g' + mu v)
//   adam:      g' = g + wd w;  m = b1 m + (1 - b1) g';  s = b2 s + (1 - b2) g'^2;
//              w -= lr (m / (1 - b1^t)) / (sqrt(s / (1 - b2^t)) + eps)   (the paper's, PyTorch's)
//   adamw:     w -= lr wd w first (decoupled), then adam's step with g' = g.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/bfloat16.h"
#include "runtime/status.h"
#include "runtime/thread_pool.h"
#include "training/config.h"

namespace lockstep::training {

// One trainable weight: its values, and the gradient the step computed for it.
struct Parameter {
  std::span<float> value;
  std::span<const float> grad;
  // Mixed precision: when not empty, the update also writes each new value rounded to bf16
  // here, in the same pass (the products' copy of the weight, made once per step).
  std::span<bfloat16> bf16_value;
};

class Optimizer {
 public:
  // Fails on an unknown type (the config parser has already refused one from a file).
  static StatusOr<Optimizer> Create(const OptimizerConfig& config);

  // One update of every parameter at learning rate `learning_rate`. The parameters must be
  // the same (count and sizes) on every call; their state is allocated on the first. With a
  // pool, stretches of the parameters are updated in parallel; every element is computed the
  // same way either way, so the result does not depend on the thread count.
  void Apply(std::span<const Parameter> params, double learning_rate, ThreadPool* pool = nullptr);

  // Apply in two halves, for a caller that walks the parameters itself (the mirrored step
  // updates each stretch of a gradient as soon as it has reduced it, while it is in cache):
  // StartStep once, then UpdateRange over every element of every parameter exactly once, from
  // any threads, on disjoint ranges. The result is Apply's, bit for bit.
  void StartStep(std::span<const Parameter> params, double learning_rate);
  void UpdateRange(std::span<const Parameter> params, size_t p, size_t begin, size_t end);

  int64_t steps() const { return steps_; }
  // Per parameter, its state vectors (momentum: v; adam: m, s; sgd: none), for checkpoints.
  std::vector<std::vector<std::vector<float>>>& state() { return state_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  friend struct OptimizerKernels;  // optimizer.cc's vectorised loops
  enum class Kind { kSgd, kMomentum, kAdam, kAdamW };
  Optimizer(Kind kind, OptimizerConfig config) : kind_(kind), config_(std::move(config)) {}
  // Elements [begin, end) of parameter p, with the step's constants.
  void Update(const Parameter& param, size_t p, size_t begin, size_t end);

  // What every element's update needs, computed once per step (StartStep).
  struct StepConstants {
    float lr, wd, l2, mu, b1, b2, eps, correct1, correct2;
    bool nesterov;
  };

  Kind kind_;
  OptimizerConfig config_;
  StepConstants k_{};
  int64_t steps_ = 0;
  std::vector<std::vector<std::vector<float>>> state_;
};

// The learning rate at step `step` (0-based) of `total_steps`: the schedule applied to `base`,
// times a linear ramp from 0 over the first warmup_steps.
double ScheduledLearningRate(const ScheduleConfig& schedule, double base, int64_t step, int64_t total_steps);

// Scales every gradient by max_norm / norm when the global L2 norm of all of them together
// exceeds max_norm (> 0). Returns the norm before clipping.
double ClipByGlobalNorm(std::span<const std::span<float>> grads, double max_norm);

}  // namespace lockstep::training
