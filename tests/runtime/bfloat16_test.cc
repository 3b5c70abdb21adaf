#include "runtime/bfloat16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace lockstep {
namespace {

uint16_t Bits(float f) { return FloatToBfloat16(f).bits; }
float FromBits32(uint32_t u) { return std::bit_cast<float>(u); }

// Round to nearest even, computed the slow way: compare the distances to the two
// neighbouring bfloat16 values.
uint16_t ReferenceRound(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t down = u & 0xffff0000u;
  uint32_t rest = u & 0xffffu;
  uint16_t lo = static_cast<uint16_t>(down >> 16);
  if (rest < 0x8000u) return lo;
  if (rest > 0x8000u) return static_cast<uint16_t>(lo + 1);
  return (lo & 1) ? static_cast<uint16_t>(lo + 1) : lo;
}

TEST(Bfloat16, ExactValuesRoundTrip) {
  for (float f : {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 3.0f, -256.0f, 1.5f}) {
    EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(f)), f) << f;
  }
}

TEST(Bfloat16, TiesRoundToEven) {
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: the even neighbour is 1.
  EXPECT_EQ(Bits(FromBits32(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(Bits(FromBits32(0x3f818000u)), 0x3f82);
  // Just above and below a tie.
  EXPECT_EQ(Bits(FromBits32(0x3f808001u)), 0x3f81);
  EXPECT_EQ(Bits(FromBits32(0x3f807fffu)), 0x3f80);
  // Negative ties behave the same on magnitude.
  EXPECT_EQ(Bits(FromBits32(0xbf808000u)), 0xbf80);
  EXPECT_EQ(Bits(FromBits32(0xbf818000u)), 0xbf82);
}

TEST(Bfloat16, NanStaysNan) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(qnan))));
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(-qnan))));
  EXPECT_TRUE(std::signbit(Bfloat16ToFloat(FloatToBfloat16(-qnan))));
  // A signalling NaN whose payload is only in the low 16 bits must not become infinity.
  const float snan_low = FromBits32(0x7f800001u);
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(snan_low))));
  // A NaN whose rounding would carry into the exponent must stay NaN too.
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(FromBits32(0x7fffffffu)))));
}

TEST(Bfloat16, InfinitiesAndSignedZero) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bits(inf), 0x7f80);
  EXPECT_EQ(Bits(-inf), 0xff80);
  EXPECT_EQ(Bits(0.0f), 0x0000);
  EXPECT_EQ(Bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(Bfloat16ToFloat(FloatToBfloat16(-0.0f))));
}

TEST(Bfloat16, Subnormals) {
  // The smallest float subnormal is below half the smallest bfloat16 subnormal: rounds to 0.
  EXPECT_EQ(Bits(FromBits32(0x00000001u)), 0x0000);
  // The smallest bfloat16 subnormal is kept, not flushed.
  EXPECT_EQ(Bits(FromBits32(0x00010000u)), 0x0001);
  EXPECT_EQ(Bits(FromBits32(0x80010000u)), 0x8001);
  // Halfway between two subnormals: to even.
  EXPECT_EQ(Bits(FromBits32(0x00018000u)), 0x0002);
  EXPECT_EQ(Bits(FromBits32(0x00028000u)), 0x0002);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(Bits(FromBits32(0x007fffffu)), 0x0080);
}

TEST(Bfloat16, LargestFiniteValues) {
  // The largest bfloat16 is 0x7f7f; float max lies above its rounding midpoint: overflows.
  EXPECT_EQ(Bits(FromBits32(0x7f7f0000u)), 0x7f7f);
  EXPECT_EQ(Bits(FromBits32(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(Bits(FromBits32(0x7f7f8000u)), 0x7f80);  // tie, odd -> even = infinity
  EXPECT_EQ(Bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(Bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(Bits(FromBits32(0x7f7e8000u)), 0x7f7e);  // tie, even: stays finite
}

TEST(Bfloat16, MatchesReferenceOnRandomBits) {
  std::mt19937 rng(42);
  for (int i = 0; i < 200000; ++i) {
    float f = FromBits32(rng());
    ASSERT_EQ(Bits(f), ReferenceRound(f)) << std::hex << std::bit_cast<uint32_t>(f);
  }
}

TEST(Bfloat16, BulkConversionMatchesScalar) {
  std::mt19937 rng(7);
  // Odd lengths exercise the vector loop and its scalar tail.
  for (size_t n : {0u, 1u, 7u, 8u, 15u, 16u, 17u, 33u, 1000u, 4099u}) {
    std::vector<float> in(n);
    for (float& f : in) f = FromBits32(rng());
    if (n > 3) {
      in[0] = std::numeric_limits<float>::quiet_NaN();
      in[1] = -std::numeric_limits<float>::infinity();
      in[2] = -0.0f;
      in[3] = FromBits32(0x00018000u);
    }
    std::vector<bfloat16> out(n);
    FloatToBfloat16(in, out);
    std::vector<float> back(n);
    Bfloat16ToFloat(out, back);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i].bits, FloatToBfloat16(in[i]).bits) << "n=" << n << " i=" << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(Bfloat16ToFloat(out[i])));
    }
  }
}

}  // namespace
}  // namespace lockstep
