#include "training/data/feature_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::training {

FeatureStatsAccumulator::FeatureStatsAccumulator(int64_t num_features)
    : mean_(static_cast<size_t>(num_features), 0.0), m2_(static_cast<size_t>(num_features), 0.0) {}

void FeatureStatsAccumulator::Add(std::span<const float> x) {
  n_ += 1;
  for (size_t j = 0; j < mean_.size(); ++j) {
    const double delta = x[j] - mean_[j];
    mean_[j] += delta / n_;
    m2_[j] += delta * (x[j] - mean_[j]);
  }
}

FeatureStats FeatureStatsAccumulator::Finish() const {
  const size_t f = mean_.size();
  FeatureStats stats;
  stats.mean.resize(f);
  stats.std.resize(f);
  for (size_t j = 0; j < f; ++j) {
    stats.mean[j] = static_cast<float>(mean_[j]);
    const double sd = n_ > 0 ? std::sqrt(m2_[j] / n_) : 0.0;
    // A spread within a few float roundings of the mean is rounding, not signal.
    const double resolution = 4 * std::numeric_limits<float>::epsilon() * std::max(1.0, std::fabs(mean_[j]));
    stats.std[j] = sd > resolution ? static_cast<float>(sd) : 1.0f;
  }
  return stats;
}

FeatureStats ComputeFeatureStats(const LabelledTable& table, std::span<const int64_t> rows) {
  FeatureStatsAccumulator stats(table.num_features());
  for (int64_t r : rows) stats.Add(table.row(r));
  return stats.Finish();
}

}  // namespace lockstep::training
