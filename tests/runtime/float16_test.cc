#include "runtime/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace lockstep {
namespace {

uint16_t HalfBitsOf(float f) { return FloatToFloat16(f).bits; }
float HalfValue(uint16_t bits) { return Float16ToFloat(float16::FromBits(bits)); }

TEST(Float16Test, ConvertsKnownValues) {
  EXPECT_EQ(HalfBitsOf(1.0f), 0x3c00);
  EXPECT_EQ(HalfBitsOf(-2.0f), 0xc000);
  EXPECT_EQ(HalfBitsOf(0.5f), 0x3800);
  EXPECT_EQ(HalfBitsOf(65504.0f), 0x7bff);
  EXPECT_EQ(HalfBitsOf(0.0f), 0x0000);
  EXPECT_EQ(HalfBitsOf(-0.0f), 0x8000);
  EXPECT_EQ(HalfBitsOf(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(HalfBitsOf(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(HalfBitsOf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(HalfBitsOf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_FLOAT_EQ(HalfValue(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfValue(0x0001), std::ldexp(1.0f, -24));
}

TEST(Float16Test, RoundsToNearestEvenAtEveryBoundary) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): even wins, 1.
  EXPECT_EQ(HalfBitsOf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // Halfway above an odd mantissa rounds up.
  EXPECT_EQ(HalfBitsOf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // 65520 is halfway from 65504 (odd mantissa) to 65536, which is past the range: infinity.
  EXPECT_EQ(HalfBitsOf(65519.0f), 0x7bff);
  EXPECT_EQ(HalfBitsOf(65520.0f), 0x7c00);
  // 2^-25 is halfway between 0 and the smallest subnormal: even wins, 0; above it, 2^-24.
  EXPECT_EQ(HalfBitsOf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(HalfBitsOf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(HalfBitsOf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
}

TEST(Float16Test, EveryHalfSurvivesTheRoundTrip) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = HalfValue(static_cast<uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfValue(HalfBitsOf(f)))) << bits;
      continue;
    }
    EXPECT_EQ(HalfBitsOf(f), bits) << std::hex << bits;
  }
}

TEST(Float16Test, RandomFloatsRoundToTheNearestHalf) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-27.0f, 16.5f);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::exp2(exponent(rng)) * ((i & 1) ? -1.0f : 1.0f);
    const uint16_t h = HalfBitsOf(f);
    const double got = HalfValue(h);
    if (std::isinf(got)) {
      EXPECT_GE(std::fabs(f), 65520.0f) << f;
      continue;
    }
    // Neither neighbour of the answer is nearer, and on a tie the answer's mantissa is even.
    const double error = std::fabs(got - f);
    for (const int step : {-1, 1}) {
      const int neighbour = (h & 0x7fff) + step;
      if (neighbour < 0 || neighbour >= 0x7c00) continue;
      const double other = std::fabs(HalfValue(static_cast<uint16_t>((h & 0x8000) | neighbour)) - f);
      EXPECT_TRUE(error < other || (error == other && (h & 1) == 0)) << f << " -> " << std::hex << h;
    }
  }
}

}  // namespace
}  // namespace lockstep
