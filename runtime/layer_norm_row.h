// One row of a layer normalisation, written once for every instruction set: activation.cc
// compiles it for AVX-512F, AVX2 and baseline x86-64 (LayerNormRow), the LayerNormalize ops run
// it for float64 and their gradient's moments from it. Everything here is always inlined so
// that each caller's instruction set is the one the loops are compiled for.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

namespace lockstep {

// GCC vectors of 16 lanes, lowered to whatever the instruction set has.
template <typename T>
struct SixteenLanes;
template <>
struct SixteenLanes<float> {
  using type = float __attribute__((vector_size(64)));
};
template <>
struct SixteenLanes<double> {
  using type = double __attribute__((vector_size(128)));
};

// Over a row, the sum of x[i] or (kSquares) of (x[i] - mean)^2, in 16 lanes (element i in lane
// i % 16), then the lanes in order: one fixed order on every instruction set and thread count,
// and vector adds rather than one dependent add an element (a BERT's or a ViT's 768-wide rows
// ran at 1.7 ns an element).
template <bool kSquares, typename T>
[[gnu::always_inline]] inline T LaneSum(const T* x, int64_t d, T mean) {
  constexpr int64_t kL = 16;
  using Lanes = typename SixteenLanes<T>::type;
  Lanes acc = {};
  int64_t i = 0;
  for (; i + kL <= d; i += kL) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof v);
    if constexpr (kSquares) {
      v -= mean;
      v *= v;
    }
    acc += v;
  }
  T lanes[kL];
  std::memcpy(lanes, &acc, sizeof lanes);
  for (; i < d; ++i) lanes[i % kL] += kSquares ? (x[i] - mean) * (x[i] - mean) : x[i];
  T sum = 0;
  for (int64_t l = 0; l < kL; ++l) sum += lanes[l];
  return sum;
}

// Mean and 1 / sqrt(var + epsilon) of one row (the biased variance).
template <typename T>
[[gnu::always_inline]] inline std::pair<T, T> RowMoments(const T* x, int64_t d, T epsilon) {
  const T mean = LaneSum<false>(x, d, T(0)) / static_cast<T>(d);
  const T sq = LaneSum<true>(x, d, mean);
  return {mean, T(1) / std::sqrt(sq / static_cast<T>(d) + epsilon)};
}

// y = (x - mean) * inv, then y * scale[i] and y + offset[i] where given (null: skipped): each a
// rounding of its own, as the separate Mul and Add that a model's scale and offset are, so that
// the fused and the unfused graph give the same bits. `y` the same as `x` or not overlapping it.
template <typename T>
[[gnu::always_inline]] inline void LayerNormRowAny(const T* x, const T* scale, const T* offset, T* y, int64_t d,
                                                   T epsilon) {
  const auto [mean, inv] = RowMoments(x, d, epsilon);
  if (scale != nullptr && offset != nullptr) {
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - mean) * inv * scale[i] + offset[i];
  } else if (scale != nullptr) {
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - mean) * inv * scale[i];
  } else if (offset != nullptr) {
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - mean) * inv + offset[i];
  } else {
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] - mean) * inv;
  }
}

// The gradient of one row of the plain normalisation y = (x - mean) * inv: with g = dy and
// y's mean products taken in lanes as LaneSum's, dx = (g - mean(g) - y * mean(g * y)) * inv.
// `dx` must not overlap `x` or `dy`.
template <typename T>
[[gnu::always_inline]] inline void LayerNormGradRowAny(const T* x, const T* dy, T* dx, int64_t d, T epsilon) {
  constexpr int64_t kL = 16;
  using Lanes = typename SixteenLanes<T>::type;
  const auto [mean, inv] = RowMoments(x, d, epsilon);
  Lanes g_acc = {}, gy_acc = {};
  int64_t i = 0;
  for (; i + kL <= d; i += kL) {
    Lanes g, v;
    std::memcpy(&g, dy + i, sizeof g);
    std::memcpy(&v, x + i, sizeof v);
    g_acc += g;
    gy_acc += g * ((v - mean) * inv);
  }
  T g_lanes[kL], gy_lanes[kL];
  std::memcpy(g_lanes, &g_acc, sizeof g_lanes);
  std::memcpy(gy_lanes, &gy_acc, sizeof gy_lanes);
  for (; i < d; ++i) {
    g_lanes[i % kL] += dy[i];
    gy_lanes[i % kL] += dy[i] * ((x[i] - mean) * inv);
  }
  T g_sum = 0, gy_sum = 0;
  for (int64_t l = 0; l < kL; ++l) {
    g_sum += g_lanes[l];
    gy_sum += gy_lanes[l];
  }
  const T g_mean = g_sum / static_cast<T>(d), gy_mean = gy_sum / static_cast<T>(d);
  for (i = 0; i < d; ++i) dx[i] = (dy[i] - g_mean - (x[i] - mean) * inv * gy_mean) * inv;
}

}  // namespace lockstep
