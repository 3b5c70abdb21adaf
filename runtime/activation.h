// Element-wise activations, shared by the activation ops and the matmul epilogue so that a
// fused and an unfused graph compute exactly the same values.
#pragma once

#include <cmath>
#include <span>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

// Relu6, Elu and Selu serve imported TensorFlow models (Keras and MobileNet-style layers):
// they run, fused into a MatMul's epilogue too, but are not differentiated.
enum class Activation { kNone, kRelu, kGelu, kSigmoid, kTanh, kRelu6, kElu, kSelu };

// "none", "relu", "gelu", "sigmoid", "tanh", "relu6", "elu", "selu".
std::string_view ActivationName(Activation a);
StatusOr<Activation> ParseActivation(std::string_view name);

// For float (the models) and double (gradient checks); the float form's constants are the
// float roundings of the double ones, so it computes exactly what it always has.
template <typename T>
inline T ApplyActivation(Activation a, T x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x < T(0) ? T(0) : x;  // NaN passes through
    // The exact form, 0.5 x (1 + erf(x / sqrt 2)), as Keras and PyTorch default to.
    case Activation::kGelu:
      if (std::isinf(x)) return x > T(0) ? x : T(-0.0);  // the formula would give inf * 0 = NaN
      return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
    case Activation::kSigmoid: return T(1) / (T(1) + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kRelu6: return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);  // NaN passes through
    case Activation::kElu: return x > T(0) ? x : std::expm1(x);
    // TensorFlow's constants (tf.nn.selu), the fixed point of self-normalisation.
    case Activation::kSelu:
      return T(1.0507009873554804934193349852946) *
             (x > T(0) ? x : T(1.6732632423543772848170429916717) * std::expm1(x));
  }
  return x;
}

// In place over a contiguous run.
void ApplyActivation(Activation a, std::span<float> values);

}  // namespace lockstep
