// bfloat16: the upper 16 bits of an IEEE float32. Conversion from float32 rounds to nearest,
// ties to even; NaN stays NaN (quietened, sign kept); infinities, signed zeros and subnormals
// are preserved (no flush to zero); finite values past the largest bfloat16 round to infinity
// exactly as IEEE rounding says.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace lockstep {

struct bfloat16 {
  uint16_t bits = 0;

  static constexpr bfloat16 FromBits(uint16_t b) { return bfloat16{b}; }
  friend constexpr bool operator==(bfloat16 a, bfloat16 b) { return a.bits == b.bits; }
};

constexpr bfloat16 FloatToBfloat16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncate and set the quiet bit so a payload living only in the low bits survives.
    return bfloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}

constexpr float Bfloat16ToFloat(bfloat16 b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b.bits) << 16);
}

// Bulk conversions; `out` must be at least as long as `in`. Vectorised (AVX-512 or AVX2 when
// the CPU has them, chosen once at start-up); results are bit-identical to the scalar forms.
void FloatToBfloat16(std::span<const float> in, std::span<bfloat16> out);
void Bfloat16ToFloat(std::span<const bfloat16> in, std::span<float> out);

}  // namespace lockstep
