// Element-wise activations, shared by the activation ops and the matmul epilogue so that a
// fused and an unfused graph compute exactly the same values.
#pragma once

#include <cmath>
#include <span>
#include <string_view>
#include <type_traits>

#include "runtime/status.h"

namespace lockstep {

// Relu6, Elu and Selu serve imported TensorFlow models (Keras and MobileNet-style layers):
// they run, fused into a MatMul's epilogue too, but are not differentiated.
enum class Activation { kNone, kRelu, kGelu, kSigmoid, kTanh, kRelu6, kElu, kSelu };

// "none", "relu", "gelu", "sigmoid", "tanh", "relu6", "elu", "selu".
std::string_view ActivationName(Activation a);
StatusOr<Activation> ParseActivation(std::string_view name);

// erf for float without a call into libm, so that a loop over it vectorises: x P(x^2) / Q(x^2)
// on [-4, 4] (from 3.87 on, erf is +-1 in float), with P of degree 6 and Q of degree 5 fitted for
// Lockstep (a weighted least-squares iteration towards the minimax error against float64 erf).
// Evaluated in float its error is below 4e-7 absolute and 3e-7 relative under 0.5; Q >= 1,
// so there is no pole.
inline float ErfFloat(float x) {
  const float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  const float z = c * c;
  const float p = 1.128379225730896f +
                  z * (0.18395359814167023f +
                       z * (0.05425324663519859f +
                            z * (0.0038107375148683786f +
                                 z * (0.0003829365305136889f + z * (4.8069450713228434e-06f + z * -1.3752218031015673e-08f)))));
  const float q = 1.0f + z * (0.49635830521583557f +
                              z * (0.11353198438882828f +
                                   z * (0.015397747978568077f + z * (0.0013039467157796025f + z * 6.424890307243913e-05f))));
  const float e = c * p / q;
  // From 3.87 on, erf rounds to 1 in float.
  return x >= 3.87f ? 1.0f : (x <= -3.87f ? -1.0f : e);
}

// The exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as Keras and PyTorch default to. Branch-free for
// float (ErfFloat), so that the matmul epilogue's loop over a row vectorises; double (gradient
// checks) through std::erf.
template <typename T>
inline T Gelu(T x) {
  if constexpr (std::is_same_v<T, float>) {
    // Below -8 the formula gives -0 (and NaN for -inf, from -inf * 0).
    const float y = 0.5f * x * (1.0f + ErfFloat(x * 0.70710678118654752440f));
    return x < -8.0f ? -0.0f : y;
  } else {
    if (std::isinf(x)) return x > T(0) ? x : T(-0.0);  // the formula would give inf * 0 = NaN
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
}

// For float (the models) and double (gradient checks); the float form's constants are the
// float roundings of the double ones (GELU's erf excepted: ErfFloat).
template <typename T>
inline T ApplyActivation(Activation a, T x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x < T(0) ? T(0) : x;  // NaN passes through
    case Activation::kGelu: return Gelu(x);
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
