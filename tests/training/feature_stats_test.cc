#include "training/data/feature_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lockstep::training {
namespace {

TEST(FeatureStatsTest, MeanAndPopulationStdOfTheGivenRows) {
  LabelledTable t;
  t.feature_names = {"a", "constant", "big"};
  // Rows: (1, 5, 1e6 + 1), (2, 5, 1e6 + 2), (3, 5, 1e6 + 3), (100, 5, 0): the last is left out.
  t.features = {1, 5, 1e6f + 1, 2, 5, 1e6f + 2, 3, 5, 1e6f + 3, 100, 5, 0};
  t.labels = {0, 1, 0, 1};
  const std::vector<int64_t> rows = {0, 1, 2};
  const FeatureStats s = ComputeFeatureStats(t, rows);
  EXPECT_FLOAT_EQ(s.mean[0], 2.0f);
  EXPECT_FLOAT_EQ(s.std[0], std::sqrt(2.0f / 3.0f));
  EXPECT_FLOAT_EQ(s.mean[1], 5.0f);
  EXPECT_EQ(s.std[1], 1.0f) << "a constant feature divides by 1";
  EXPECT_FLOAT_EQ(s.mean[2], 1e6f + 2);
  EXPECT_FLOAT_EQ(s.std[2], std::sqrt(2.0f / 3.0f)) << "no cancellation at a large offset";
}

}  // namespace
}  // namespace lockstep::training
