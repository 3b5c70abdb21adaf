// Element-wise activations, shared by the activation ops and the matmul epilogue so that a
// fused and an unfused graph compute exactly the same values.
#pragma once

#include <cmath>
#include <span>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

enum class Activation { kNone, kRelu, kGelu, kSigmoid, kTanh };

// "none", "relu", "gelu", "sigmoid", "tanh".
std::string_view ActivationName(Activation a);
StatusOr<Activation> ParseActivation(std::string_view name);

inline float ApplyActivation(Activation a, float x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x < 0.0f ? 0.0f : x;  // NaN passes through
    // The exact form, 0.5 x (1 + erf(x / sqrt 2)), as Keras and PyTorch default to.
    case Activation::kGelu:
      if (std::isinf(x)) return x > 0.0f ? x : -0.0f;  // the formula would give inf * 0 = NaN
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
  }
  return x;
}

// In place over a contiguous run.
void ApplyActivation(Activation a, std::span<float> values);

}  // namespace lockstep
