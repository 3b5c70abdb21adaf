// float16: IEEE 754 binary16 (half precision), as ONNX's FLOAT16, TensorFlow's DT_HALF and the
// Open Inference Protocol's FP16 store it. A storage type: the runtime computes in float32 and
// converts at the edges (a model's float16 inputs, outputs and weights, and its casts to
// float16, which round). Conversion from float32 rounds to nearest, ties to even; NaN stays NaN
// (quiet), infinities and signed zeros are kept, subnormals are kept both ways, and finite
// values past the largest half (65504) round to infinity as IEEE rounding says.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace lockstep {

struct float16 {
  uint16_t bits = 0;

  static constexpr float16 FromBits(uint16_t b) { return float16{b}; }
  friend constexpr bool operator==(float16 a, float16 b) { return a.bits == b.bits; }
};

constexpr float Float16ToFloat(float16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);  // zero
  // Subnormal: normalise the mantissa.
  uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

constexpr float16 FloatToFloat16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return float16{static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
  if (magnitude >= 0x477ff000u) return float16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds past 65504: inf
  if (magnitude < 0x38800000u) {
    // A half subnormal (or zero): the value in units of 2^-24, rounded to nearest even.
    if (magnitude < 0x33000000u) return float16{sign};  // below half of the smallest subnormal
    const uint32_t shift = 126 - (magnitude >> 23);      // 14 to 24
    const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t half = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return float16{static_cast<uint16_t>(sign | half)};
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even (a carry may move
  // into the exponent, which is the right answer).
  const uint32_t rebased = magnitude - (112u << 23);
  const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return float16{static_cast<uint16_t>(sign | (rounded >> 13))};
}

}  // namespace lockstep
