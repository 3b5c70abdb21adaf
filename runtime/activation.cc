#include "runtime/activation.h"

#include <algorithm>
#include <cstring>

#include "runtime/layer_norm_row.h"
#include "runtime/matmul/gemm_path.h"

namespace lockstep {

std::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kTanh: return "tanh";
    case Activation::kRelu6: return "relu6";
    case Activation::kElu: return "elu";
    case Activation::kSelu: return "selu";
    case Activation::kSilu: return "silu";
    case Activation::kHardSwish: return "hard_swish";
  }
  return "none";
}

StatusOr<Activation> ParseActivation(std::string_view name) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kSigmoid,
                       Activation::kTanh, Activation::kRelu6, Activation::kElu, Activation::kSelu, Activation::kSilu,
                       Activation::kHardSwish}) {
    if (ActivationName(a) == name) return a;
  }
  return InvalidArgument("unknown activation '" + std::string(name) +
                         "' (expected none, relu, gelu, sigmoid, tanh, relu6, elu, selu, silu or hard_swish)");
}

namespace {

// One loop per activation, the activation a constant in it, so that the switch folds away and
// the loop vectorises (all but Tanh, Elu and Selu, which call libm per element).
template <Activation A>
[[gnu::always_inline]] inline void Map(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ApplyActivation(A, in[i]);
}

[[gnu::always_inline]] inline void MapAny(Activation a, const float* in, float* out, int64_t n) {
  switch (a) {
    case Activation::kNone:
      if (in != out) std::copy(in, in + n, out);
      return;
    case Activation::kRelu: return Map<Activation::kRelu>(in, out, n);
    case Activation::kGelu: return Map<Activation::kGelu>(in, out, n);
    case Activation::kSigmoid: return Map<Activation::kSigmoid>(in, out, n);
    case Activation::kTanh: return Map<Activation::kTanh>(in, out, n);
    case Activation::kRelu6: return Map<Activation::kRelu6>(in, out, n);
    case Activation::kElu: return Map<Activation::kElu>(in, out, n);
    case Activation::kSelu: return Map<Activation::kSelu>(in, out, n);
    case Activation::kSilu: return Map<Activation::kSilu>(in, out, n);
    case Activation::kHardSwish: return Map<Activation::kHardSwish>(in, out, n);
  }
}

// ApplyEpilogue with the activation a constant, and whether there is a bias and a residual.
template <Activation A, bool kBias, bool kResidual>
[[gnu::always_inline]] inline void EpilogueRows(const EpilogueBlock& e) {
  for (int64_t r = 0; r < e.rows; ++r) {
    const float* in = e.in + r * e.ld_in;
    float* out = e.out + r * e.ld_out;
    const float* res = kResidual ? e.residual + r * e.ldr : nullptr;
    for (int64_t j = 0; j < e.cols; ++j) {
      float v = in[j];
      if constexpr (kBias) v += e.bias[j];
      if constexpr (kResidual) v += res[j];
      out[j] = ApplyActivation(A, v);
    }
  }
}

template <Activation A>
[[gnu::always_inline]] inline void EpilogueFor(const EpilogueBlock& e) {
  if (e.bias != nullptr) {
    if (e.residual != nullptr) return EpilogueRows<A, true, true>(e);
    return EpilogueRows<A, true, false>(e);
  }
  if (e.residual != nullptr) return EpilogueRows<A, false, true>(e);
  EpilogueRows<A, false, false>(e);
}

[[gnu::always_inline]] inline void EpilogueAny(const EpilogueBlock& e) {
  switch (e.activation) {
    case Activation::kNone: return EpilogueFor<Activation::kNone>(e);
    case Activation::kRelu: return EpilogueFor<Activation::kRelu>(e);
    case Activation::kGelu: return EpilogueFor<Activation::kGelu>(e);
    case Activation::kSigmoid: return EpilogueFor<Activation::kSigmoid>(e);
    case Activation::kTanh: return EpilogueFor<Activation::kTanh>(e);
    case Activation::kRelu6: return EpilogueFor<Activation::kRelu6>(e);
    case Activation::kElu: return EpilogueFor<Activation::kElu>(e);
    case Activation::kSelu: return EpilogueFor<Activation::kSelu>(e);
    case Activation::kSilu: return EpilogueFor<Activation::kSilu>(e);
    case Activation::kHardSwish: return EpilogueFor<Activation::kHardSwish>(e);
  }
}

// Softmax of one row: its maximum, e^(x - max) summed in 16 lanes (then the lanes in order), each
// divided by the sum. The lanes are in the source, not chosen by the compiler, so every
// instruction set sums in the same order. A NaN anywhere makes the row NaN.
[[gnu::always_inline]] inline void SoftmaxRowAny(const float* x, float* out, int64_t n) {
  // GCC vectors of the 16 lanes (lowered to whatever the instruction set has): the maximum's
  // and the sum's loops stay vectorised, which arrays of lanes did not (1.7 ns an element).
  constexpr int64_t kL = 16;
  using Lanes = float __attribute__((vector_size(64)));
  using LaneMask = int32_t __attribute__((vector_size(64)));
  Lanes lane_max, lane_sum = {};
  LaneMask lane_nan = {};
  for (int64_t l = 0; l < kL; ++l) lane_max[l] = -INFINITY;
  const int64_t whole = n - n % kL;
  for (int64_t i = 0; i < whole; i += kL) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof v);
    lane_max = v > lane_max ? v : lane_max;
    lane_nan |= v != v;
  }
  float max = -INFINITY;
  bool nan = false;
  for (int64_t l = 0; l < kL; ++l) {
    float m = lane_max[l];
    bool is_nan = lane_nan[l] != 0;
    if (whole + l < n) {  // the tail's element in this lane
      const float v = x[whole + l];
      m = v > m ? v : m;
      is_nan = is_nan || v != v;
    }
    max = m > max ? m : max;
    nan = nan || is_nan;
  }
  if (nan) max = NAN;
  // x - max <= 0: ExpFloat without its top (ExpFloatInRange is ExpFloat from -87.34 on, and 0
  // below is ExpFloat's answer there): the same bits, fewer operations.
  constexpr float kLo = -87.33654022216797f;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - max;
    const float e = ExpFloatInRange(d < kLo ? kLo : d);
    out[i] = d < kLo ? 0.0f : e;
  }
  for (int64_t i = 0; i < whole; i += kL) {
    Lanes e;
    std::memcpy(&e, out + i, sizeof e);
    lane_sum += e;
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kL; ++l) sum += whole + l < n ? lane_sum[l] + out[whole + l] : lane_sum[l];
  for (int64_t i = 0; i < n; ++i) out[i] /= sum;
}

// The loops compiled for AVX-512F, AVX2 and baseline x86-64, picked by the matmul core's path
// (gemm_path.h), as the depthwise convolution's are: a vector of 16 exponentials costs what one
// of 4 does. Every version makes the same rounded operations in the same order (the runtime
// builds with -ffp-contract=off, so no version fuses a multiply-add the source does not ask
// for with std::fma): the same bits.
template <Activation A>
[[gnu::always_inline]] inline float Derivative(float x) {
  if constexpr (A == Activation::kGelu) {
    const float cdf = 0.5f * (1.0f + ErfFloat(x * 0.70710678118654752440f));
    const float pdf = ExpMinusClamped(0.5f * x * x) * 0.39894228040143267794f;
    return cdf + x * pdf;
  } else {
    const float s = Sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  }
}

[[gnu::always_inline]] inline void DerivativeAny(Activation a, const float* dy, const float* x, float* out,
                                                 int64_t n) {
  if (a == Activation::kGelu) {
    for (int64_t i = 0; i < n; ++i) out[i] = dy[i] * Derivative<Activation::kGelu>(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = dy[i] * Derivative<Activation::kSilu>(x[i]);
  }
}

struct Loops {
  void (*map)(Activation, const float*, float*, int64_t);
  void (*softmax)(const float*, float*, int64_t);
  void (*epilogue)(const EpilogueBlock&);
  void (*layer_norm)(const float*, const float*, const float*, float*, int64_t, float);
  void (*derivative)(Activation, const float*, const float*, float*, int64_t);
  void (*layer_norm_grad)(const float*, const float*, float*, int64_t, float);
};

void MapBaseline(Activation a, const float* in, float* out, int64_t n) { MapAny(a, in, out, n); }
void SoftmaxBaseline(const float* x, float* out, int64_t n) { SoftmaxRowAny(x, out, n); }
void EpilogueBaseline(const EpilogueBlock& e) { EpilogueAny(e); }
void LayerNormBaseline(const float* x, const float* scale, const float* offset, float* y, int64_t n, float eps) {
  LayerNormRowAny(x, scale, offset, y, n, eps);
}
void DerivativeBaseline(Activation a, const float* dy, const float* x, float* out, int64_t n) {
  DerivativeAny(a, dy, x, out, n);
}
void LayerNormGradBaseline(const float* x, const float* dy, float* dx, int64_t n, float eps) {
  LayerNormGradRowAny(x, dy, dx, n, eps);
}

#if defined(__x86_64__) && defined(__GNUC__)
// With FMA (which the AVX2 path requires, gemm_path.cc): ExpFloat's std::fma is an instruction.
__attribute__((target("avx2,fma"))) void MapAvx2(Activation a, const float* in, float* out, int64_t n) {
  MapAny(a, in, out, n);
}
__attribute__((target("avx2,fma"))) void SoftmaxAvx2(const float* x, float* out, int64_t n) {
  SoftmaxRowAny(x, out, n);
}
__attribute__((target("avx512f,fma"))) void MapAvx512(Activation a, const float* in, float* out, int64_t n) {
  MapAny(a, in, out, n);
}
__attribute__((target("avx512f,fma"))) void SoftmaxAvx512(const float* x, float* out, int64_t n) {
  SoftmaxRowAny(x, out, n);
}
__attribute__((target("avx2,fma"))) void EpilogueAvx2(const EpilogueBlock& e) { EpilogueAny(e); }
__attribute__((target("avx512f,fma"))) void EpilogueAvx512(const EpilogueBlock& e) { EpilogueAny(e); }
__attribute__((target("avx2,fma"))) void LayerNormAvx2(const float* x, const float* scale, const float* offset,
                                                       float* y, int64_t n, float eps) {
  LayerNormRowAny(x, scale, offset, y, n, eps);
}
__attribute__((target("avx512f,fma"))) void LayerNormAvx512(const float* x, const float* scale, const float* offset,
                                                            float* y, int64_t n, float eps) {
  LayerNormRowAny(x, scale, offset, y, n, eps);
}
__attribute__((target("avx2,fma"))) void DerivativeAvx2(Activation a, const float* dy, const float* x, float* out,
                                                        int64_t n) {
  DerivativeAny(a, dy, x, out, n);
}
__attribute__((target("avx512f,fma"))) void DerivativeAvx512(Activation a, const float* dy, const float* x, float* out,
                                                             int64_t n) {
  DerivativeAny(a, dy, x, out, n);
}
__attribute__((target("avx2,fma"))) void LayerNormGradAvx2(const float* x, const float* dy, float* dx, int64_t n,
                                                           float eps) {
  LayerNormGradRowAny(x, dy, dx, n, eps);
}
__attribute__((target("avx512f,fma"))) void LayerNormGradAvx512(const float* x, const float* dy, float* dx, int64_t n,
                                                                float eps) {
  LayerNormGradRowAny(x, dy, dx, n, eps);
}
#endif

Loops ChooseLoops() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (ActiveGemmPath()) {
    case GemmPath::kAvx512:
    case GemmPath::kAvx512Bf16:
      return {MapAvx512, SoftmaxAvx512, EpilogueAvx512, LayerNormAvx512, DerivativeAvx512, LayerNormGradAvx512};
    case GemmPath::kAvx2:
      return {MapAvx2, SoftmaxAvx2, EpilogueAvx2, LayerNormAvx2, DerivativeAvx2, LayerNormGradAvx2};
    case GemmPath::kPortable: break;
  }
#endif
  return {MapBaseline, SoftmaxBaseline, EpilogueBaseline, LayerNormBaseline, DerivativeBaseline, LayerNormGradBaseline};
}

}  // namespace

void ApplyActivation(Activation a, const float* in, float* out, int64_t n) {
  if (a == Activation::kNone && in == out) return;
  ChooseLoops().map(a, in, out, n);
}

void ApplyEpilogue(const EpilogueBlock& block) {
  if (block.rows > 0 && block.cols > 0) ChooseLoops().epilogue(block);
}

void SoftmaxRow(const float* x, float* out, int64_t n) {
  if (n > 0) ChooseLoops().softmax(x, out, n);
}

void LayerNormRow(const float* x, const float* scale, const float* offset, float* out, int64_t n, float epsilon) {
  if (n > 0) ChooseLoops().layer_norm(x, scale, offset, out, n, epsilon);
}

void LayerNormGradRow(const float* x, const float* dy, float* dx, int64_t n, float epsilon) {
  if (n > 0) ChooseLoops().layer_norm_grad(x, dy, dx, n, epsilon);
}

void ActivationDerivativeRow(Activation a, const float* dy, const float* x, float* out, int64_t n) {
  if (n > 0) ChooseLoops().derivative(a, dy, x, out, n);
}

void ApplyActivation(Activation a, std::span<float> values) {
  ApplyActivation(a, values.data(), values.data(), static_cast<int64_t>(values.size()));
}

}  // namespace lockstep
