// Element-wise activations, shared by the activation ops and the matmul epilogue so that a
// fused and an unfused graph compute exactly the same values.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "runtime/status.h"

namespace lockstep {

// Relu6, Elu, Selu, SiLU and HardSwish serve imported models (Keras and MobileNet-style layers,
// EfficientNet's and MobileNetV3's blocks): they run, fused into a MatMul's or a convolution's
// epilogue too, but are not differentiated.
enum class Activation { kNone, kRelu, kGelu, kSigmoid, kTanh, kRelu6, kElu, kSelu, kSilu, kHardSwish };

// "none", "relu", "gelu", "sigmoid", "tanh", "relu6", "elu", "selu", "silu", "hard_swish".
std::string_view ActivationName(Activation a);
StatusOr<Activation> ParseActivation(std::string_view name);

// erf for float without a call into libm, so that a loop over it vectorises: x P(x^2) / Q(x^2)
// on [-4, 4] (from 3.87 on, erf is +-1 in float), with P of degree 6 and Q of degree 5 fitted for
// Lockstep (a weighted least-squares iteration towards the minimax error against float64 erf).
// Evaluated in float its error is below 4e-7 absolute and 3e-7 relative under 0.5; Q >= 1,
// so there is no pole. P and Q by Horner's rule in fused multiply-adds (std::fma: one rounding
// wherever it runs, as ExpFloat's), half the operations of separate ones: a ConvNeXt's GELUs
// took 4 % of it at 0.42 ns an element.
inline float ErfFloat(float x) {
  const float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  const float z = c * c;
  float p = std::fma(z, -1.3752218031015673e-08f, 4.8069450713228434e-06f);
  p = std::fma(z, p, 0.0003829365305136889f);
  p = std::fma(z, p, 0.0038107375148683786f);
  p = std::fma(z, p, 0.05425324663519859f);
  p = std::fma(z, p, 0.18395359814167023f);
  p = std::fma(z, p, 1.128379225730896f);
  float q = std::fma(z, 6.424890307243913e-05f, 0.0013039467157796025f);
  q = std::fma(z, q, 0.015397747978568077f);
  q = std::fma(z, q, 0.11353198438882828f);
  q = std::fma(z, q, 0.49635830521583557f);
  q = std::fma(z, q, 1.0f);
  const float e = c * p / q;
  // From 3.87 on, erf rounds to 1 in float.
  return x >= 3.87f ? 1.0f : (x <= -3.87f ? -1.0f : e);
}

// e^c = y * 2^k for c in ExpFloat's clamped range: the reduction and polynomial both e^x
// functions below share.
struct ExpSplit {
  float y;     // e^r, r = c - k ln 2, |r| <= ln 2 / 2
  uint32_t k;  // k, as a two's complement integer
};
inline ExpSplit SplitExp(float c) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = std::fma(c, 1.44269504088896341f, kShift);
  const float n = t - kShift;
  const float r = std::fma(n, 2.12194440e-4f, std::fma(n, -0.693359375f, c));
  float p = std::fma(1.9875691500e-4f, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  return {std::fma(p, r * r, r) + 1.0f, std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kShift)};
}

// e^x for float without a call into libm, so that loops over sigmoids and SiLUs vectorise:
// x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts), e^r by the classic degree-6
// polynomial (Cephes' expf) in fused multiply-adds, times 2^n built in the exponent bits.
// Within 2 ulp of e^x for normal results; 0 below -87.34 (where e^x would be subnormal), +inf
// above 88.72, NaN for NaN. The rounding to n uses the 1.5 * 2^23 trick, so no float-to-int
// conversion ever sees an out-of-range value. The fused multiply-adds are std::fma, rounded
// once wherever they run (an instruction where the loop is compiled for FMA, activation.cc;
// libm's exact fmaf elsewhere), so every instruction set gets the same bits.
inline float ExpFloat(float x) {
  constexpr float kHi = 88.72283935546875f, kLo = -87.33654022216797f;
  const ExpSplit e = SplitExp(x > kHi ? kHi : (x < kLo ? kLo : x));
  // k in [-126, 128]: 2^k as 2^(k - 1) * 2 at the top, where 2^128 has no float.
  const uint32_t top = static_cast<int32_t>(e.k) > 127 ? 1u : 0u;
  const float scale = std::bit_cast<float>((e.k - top + 127u) << 23);
  const float v = e.y * scale * (top != 0 ? 2.0f : 1.0f);
  return x > kHi ? INFINITY : (x < kLo ? 0.0f : v);
}

// e^x as ExpFloat for x in [-87.33, 88] only (2^k in [2^-126, 2^127]: no case for the top, no
// clamps), for the sigmoids, which clamp their argument into it first: a third fewer
// operations, and sigmoids and SiLUs are most of the elementwise work of an EfficientNet.
inline float ExpFloatInRange(float x) {
  const ExpSplit e = SplitExp(x);
  return e.y * std::bit_cast<float>((e.k + 127u) << 23);
}

// e^-x clamped into ExpFloatInRange's domain: below -87.33 it is 1.2e-38 rather than smaller,
// so 1 + e^-x is 1 all the same; above 88 it is e^88, so x / (1 + e^-x) is within 3e-37 of
// x e^x up to x = -88.72, where the callers take over.
inline float ExpMinusClamped(float x) {
  const float m = -x;
  return ExpFloatInRange(m > 88.0f ? 88.0f : (m < -87.33654022216797f ? -87.33654022216797f : m));
}

// 1 / (1 + e^-x); float through ExpFloatInRange (vectorises), double (gradient checks)
// through libm. Below -88.72, where e^-x overflows float, 0 (a NaN stays NaN).
template <typename T>
inline T Sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float s = 1.0f / (1.0f + ExpMinusClamped(x));
    return x < -88.72283935546875f ? 0.0f : s;
  } else {
    return T(1) / (T(1) + std::exp(-x));
  }
}

// x * sigmoid(x) = x / (1 + e^-x); float through ExpFloatInRange, double through libm. Below
// -88.72, x * 0: -0, and NaN for -inf (as PyTorch's x * sigmoid(x)).
template <typename T>
inline T Silu(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float s = x / (1.0f + ExpMinusClamped(x));
    return x < -88.72283935546875f ? x * 0.0f : s;
  } else {
    return x / (T(1) + std::exp(-x));
  }
}

// x * min(max(x / 6 + 1/2, 0), 1): MobileNetV3's h-swish, ONNX's HardSwish (whose definition
// multiplies by alpha = 1/6, as here: no division).
template <typename T>
inline T HardSwish(T x) {
  const T v = x * (T(1) / T(6)) + T(0.5);
  return x * (v < T(0) ? T(0) : v > T(1) ? T(1) : v);
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
    case Activation::kSigmoid: return Sigmoid(x);
    case Activation::kTanh: return std::tanh(x);
    case Activation::kRelu6: return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);  // NaN passes through
    case Activation::kElu: return x > T(0) ? x : std::expm1(x);
    // TensorFlow's constants (tf.nn.selu), the fixed point of self-normalisation.
    case Activation::kSelu:
      return T(1.0507009873554804934193349852946) *
             (x > T(0) ? x : T(1.6732632423543772848170429916717) * std::expm1(x));
    // x * sigmoid(x) as x / (1 + e^-x): one division where the two ops PyTorch exports
    // (Mul(x, Sigmoid(x))) make a division and a product, so within an ulp of them.
    case Activation::kSilu: return Silu(x);
    case Activation::kHardSwish: return HardSwish(x);
  }
  return x;
}

// Over a contiguous run, in place or from `in` to `out` (the same or not overlapping), on the
// widest vectors the matmul core's path allows (gemm_path.h): the same bits on every path.
void ApplyActivation(Activation a, std::span<float> values);
void ApplyActivation(Activation a, const float* in, float* out, int64_t n);

// The epilogue of a product (the matmul core's, FusedConv2D's, FusedMatMul's) over a block of
// `rows` x `cols`: out = activation((in + bias) + residual), bias [cols] and residual (leading
// dimension ldr) each when not null, in that order, one pass, vectorised like the activations;
// `in` and `out` the same or not overlapping. One call for a block: per row the dispatch cost
// as much as a 32-wide tile's SiLUs.
struct EpilogueBlock {
  const float* in = nullptr;
  int64_t ld_in = 0;
  float* out = nullptr;
  int64_t ld_out = 0;
  int64_t rows = 0, cols = 0;
  const float* bias = nullptr;
  const float* residual = nullptr;
  int64_t ldr = 0;
  Activation activation = Activation::kNone;
};
void ApplyEpilogue(const EpilogueBlock& block);

// Softmax over one row of n floats, `out` the same as `x` or not overlapping it: e^(x - max)
// (ExpFloat) over the sum, vectorised like the activations and the same bits on every path.
// A NaN anywhere in the row makes the whole row NaN; so do +inf and a row of all -inf.
void SoftmaxRow(const float* x, float* out, int64_t n);

// dy times the derivative at x of GELU or SiLU (`a`; no other), over n floats: for the
// gradients' kernels, vectorised like the activations (ErfFloat, ExpFloat) and the same bits on
// every path. GELU: Φ(x) + x φ(x); SiLU: s(x) (1 + x (1 - s(x))), s the logistic function.
void ActivationDerivativeRow(Activation a, const float* dy, const float* x, float* out, int64_t n);

// LayerNormalize over one row of n floats (layer_norm_row.h: zero mean and unit variance, then
// times scale[i] and plus offset[i] where not null), vectorised like the activations and the
// same bits on every path.
void LayerNormRow(const float* x, const float* scale, const float* offset, float* out, int64_t n, float epsilon);

// LayerNormalize's gradient over one row (layer_norm_row.h's LayerNormGradRowAny), likewise.
void LayerNormGradRow(const float* x, const float* dy, float* dx, int64_t n, float epsilon);

}  // namespace lockstep
