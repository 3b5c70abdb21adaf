// Per-feature mean and standard deviation of the training rows: the parameters of the
// Normalize node model-train puts at the front of the exported graph, so that clients send
// raw features and training and serving normalise the same way.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "training/data/labelled_table.h"

namespace lockstep::training {

struct FeatureStats {
  std::vector<float> mean;
  // The population standard deviation; 1 where a feature is constant over the rows (such a
  // feature then normalises to 0 rather than dividing by zero).
  std::vector<float> std;
};

// Welford's updates in double precision, row by row: the same rows in the same order give the
// same bits, whether they come from a table or stream past (data_scan.h).
class FeatureStatsAccumulator {
 public:
  explicit FeatureStatsAccumulator(int64_t num_features);
  void Add(std::span<const float> row);
  int64_t rows() const { return static_cast<int64_t>(n_); }
  FeatureStats Finish() const;

 private:
  std::vector<double> mean_, m2_;
  double n_ = 0;
};

// One pass over `rows` of `table`.
FeatureStats ComputeFeatureStats(const LabelledTable& table, std::span<const int64_t> rows);

}  // namespace lockstep::training
