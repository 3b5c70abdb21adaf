#include "training/data/feature_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::training {

FeatureStats ComputeFeatureStats(const LabelledTable& table, std::span<const int64_t> rows) {
  const auto f = static_cast<size_t>(table.num_features());
  std::vector<double> mean(f, 0.0), m2(f, 0.0);
  double n = 0;
  for (int64_t r : rows) {
    n += 1;
    const std::span<const float> x = table.row(r);
    for (size_t j = 0; j < f; ++j) {
      const double delta = x[j] - mean[j];
      mean[j] += delta / n;
      m2[j] += delta * (x[j] - mean[j]);
    }
  }
  FeatureStats stats;
  stats.mean.resize(f);
  stats.std.resize(f);
  for (size_t j = 0; j < f; ++j) {
    stats.mean[j] = static_cast<float>(mean[j]);
    const double sd = n > 0 ? std::sqrt(m2[j] / n) : 0.0;
    // A spread within a few float roundings of the mean is rounding, not signal.
    const double resolution = 4 * std::numeric_limits<float>::epsilon() * std::max(1.0, std::fabs(mean[j]));
    stats.std[j] = sd > resolution ? static_cast<float>(sd) : 1.0f;
  }
  return stats;
}

}  // namespace lockstep::training
