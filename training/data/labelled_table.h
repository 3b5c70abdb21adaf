// LabelledTable: examples held in memory as a numeric feature matrix and a class id (or
// regression's target values) per row,
// what a CSV file (csv_reader.h) becomes before the input pipeline shuffles and batches it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace lockstep::training {

// A feature as the source names it: a CSV column (width 1), or a tf.Example key holding
// `width` values.
struct FeatureKey {
  std::string name;
  int64_t width = 1;
  friend bool operator==(const FeatureKey&, const FeatureKey&) = default;
};

// Where a row came from, for messages that name it.
struct RowOrigin {
  int32_t file = 0;      // index into LabelledTable::source_files
  int64_t position = 0;  // CSV: the line number; TFRecord: the record's byte offset
};

struct LabelledTable {
  std::vector<std::string> feature_names;  // one per column of `features`
  std::vector<FeatureKey> feature_keys;    // the same columns grouped by source key, in order
  std::vector<float> features;             // row-major [num_rows(), num_features()]
  std::vector<int32_t> labels;             // class id per row, >= 0; all 0 for regression
  // Regression's target values, row-major [num_rows(), num_targets()], one name per column as
  // for the features ("y", or "y[1]" for a key of several values). Empty for classification.
  std::vector<std::string> target_names;
  std::vector<FeatureKey> target_keys;
  std::vector<float> targets;
  // When the source's labels were names: class id -> name, ids given in sorted name order.
  // Empty when the labels were integer ids already.
  std::vector<std::string> class_names;
  // One origin per row (empty for a table built in code); positions are byte offsets of
  // records when `record_offsets`, else line numbers.
  std::vector<std::string> source_files;
  std::vector<RowOrigin> origins;
  bool record_offsets = false;

  int64_t num_features() const { return static_cast<int64_t>(feature_names.size()); }
  int64_t num_rows() const { return static_cast<int64_t>(labels.size()); }
  int64_t num_targets() const { return static_cast<int64_t>(target_names.size()); }
  std::span<const float> target_row(int64_t i) const {
    return std::span<const float>(targets).subspan(static_cast<size_t>(i * num_targets()),
                                                   static_cast<size_t>(num_targets()));
  }
  std::span<const float> row(int64_t i) const {
    return std::span<const float>(features).subspan(static_cast<size_t>(i * num_features()),
                                                    static_cast<size_t>(num_features()));
  }
  // One more than the largest label (0 for an empty table).
  int32_t num_classes() const;
  // "digits.csv:57" or "a.tfrecord: record at offset 1234"; "row 57" (from 1) without origins.
  std::string Where(int64_t row) const;
  // Appends `other`'s rows (same features), with their origins.
  void Append(const LabelledTable& other);
};

// Sets `table.labels` and `table.class_names` from one class name per row: ids in sorted name
// order, so that the same set of names always gives the same ids.
void AssignClassNames(const std::vector<std::string>& names, LabelledTable& table);

// Renumbers `table`'s labels by `reference`'s class names, so that a held-out file read on its
// own means the same class by the same id as the training file. Both must have names, or both
// integer ids (then nothing changes); a name the reference lacks is an error naming it.
Status MapClassesOnto(const LabelledTable& reference, LabelledTable& table);

}  // namespace lockstep::training
