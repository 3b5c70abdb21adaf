#include "training/initializers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace lockstep::training {
namespace {

TEST(InitializersTest, UniformWithinTheLimitAndSeeded) {
  std::vector<float> a(6400), b(6400);
  Random r1(3), r2(3);
  ASSERT_TRUE(Initialize("glorot_uniform", 64, 36, r1, a).ok());
  ASSERT_TRUE(Initialize("glorot_uniform", 64, 36, r2, b).ok());
  EXPECT_EQ(a, b) << "the same seed gives the same weights";
  const float limit = static_cast<float>(std::sqrt(6.0 / 100.0));
  EXPECT_LE(*std::max_element(a.begin(), a.end()), limit);
  EXPECT_GE(*std::min_element(a.begin(), a.end()), -limit);
  EXPECT_GT(*std::max_element(a.begin(), a.end()), 0.95f * limit) << "the whole range is used";
  double mean = 0;
  for (float v : a) mean += v;
  EXPECT_NEAR(mean / static_cast<double>(a.size()), 0.0, 0.01);

  ASSERT_TRUE(Initialize("he_uniform", 24, 1000, r1, a).ok());
  EXPECT_LE(*std::max_element(a.begin(), a.end()), 0.5f);
  EXPECT_GT(*std::max_element(a.begin(), a.end()), 0.45f);
  ASSERT_TRUE(Initialize("zeros", 1, 1, r1, a).ok());
  EXPECT_EQ(*std::max_element(a.begin(), a.end()), 0.0f);
  EXPECT_FALSE(Initialize("orthogonal", 1, 1, r1, a).ok());
}

}  // namespace
}  // namespace lockstep::training
