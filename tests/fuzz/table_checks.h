// The promises of training/data/labelled_table.h that every reader must keep, checked on what
// the CSV and TFRecord targets read.
#pragma once

#include <cmath>

#include "tests/fuzz/fuzz_targets.h"
#include "training/data/labelled_table.h"

namespace lockstep::fuzz {

inline void CheckTable(const training::LabelledTable& table) {
  LOCKSTEP_FUZZ_CHECK(table.features.size() == static_cast<size_t>(table.num_rows() * table.num_features()));
  LOCKSTEP_FUZZ_CHECK(table.origins.size() == table.labels.size());
  int64_t width = 0;
  for (const training::FeatureKey& key : table.feature_keys) width += key.width;
  LOCKSTEP_FUZZ_CHECK(width == table.num_features());
  for (int32_t label : table.labels) {
    LOCKSTEP_FUZZ_CHECK(label >= 0);
    if (!table.class_names.empty())
      LOCKSTEP_FUZZ_CHECK(static_cast<size_t>(label) < table.class_names.size());
  }
  for (float f : table.features) LOCKSTEP_FUZZ_CHECK(std::isfinite(f));
  // Regression: a row of targets per label, every one finite.
  LOCKSTEP_FUZZ_CHECK(table.targets.size() == static_cast<size_t>(table.num_rows() * table.num_targets()));
  for (float t : table.targets) LOCKSTEP_FUZZ_CHECK(std::isfinite(t));
}

}  // namespace lockstep::fuzz
