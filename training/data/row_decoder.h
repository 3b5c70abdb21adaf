// Decoding one record of a data file into a row of features and a label, for the streaming
// input, which never holds a table: a tf.train.Example's keys (read where they lie in the
// record, runtime/example_wire.h: no message is built, nothing allocated), or a CSV line's
// columns.
// Errors name the file and where in it (record offset or line), and the key or column.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"
#include "training/data/labelled_table.h"
#include "training/data/record_stream.h"

namespace lockstep::training {

// What a row is: the features in order with their widths, and how labels map to class ids
// (classification) or which values are the targets (regression).
struct RowFormat {
  std::string format;                      // "csv" or "tfrecord"
  std::string label;                       // the label column or key (classification)
  std::vector<FeatureKey> feature_keys;    // in order
  std::vector<std::string> feature_names;  // one per value: "x", or "pixels[3]" for a wide key
  // Sorted class names when the labels are names; empty when they are integer ids.
  std::vector<std::string> class_names;
  // Regression: the target columns or keys in order, with their widths, and one name per
  // value. Empty for classification.
  std::vector<FeatureKey> target_keys;
  std::vector<std::string> target_names;

  int64_t num_features() const { return static_cast<int64_t>(feature_names.size()); }
  int64_t num_targets() const { return static_cast<int64_t>(target_names.size()); }
  bool regression() const { return !target_keys.empty(); }
};

// A label as the record has it: an integer id, or a class name (a view into the record).
struct RawLabel {
  bool is_name = false;
  int64_t id = 0;
  std::string_view name;
};

// The features and label (or, with `targets`, the regression targets) a record must have,
// worked out from the first file's first record (a CSV header, or a tf.train.Example's
// widths); class_names are left for the caller. `features` empty: every CSV column but the
// label or the targets.
StatusOr<RowFormat> DiscoverRowFormat(const std::string& format, const std::string& label,
                                      const std::vector<std::string>& targets,
                                      const std::vector<std::string>& features, const RecordStream& file,
                                      std::string_view first_record);

class RowDecoder {
 public:
  explicit RowDecoder(const RowFormat& format) : format_(format) {}

  // A CSV file's header decides which column is which (files may order them differently).
  Status StartFile(const RecordStream& file);
  // The record `file` last returned into `row` (num_features floats) and `label`; for
  // regression into `targets` (num_targets floats; empty for classification), and `label` is
  // id 0.
  Status Decode(std::string_view record, const RecordStream& file, std::span<float> row, RawLabel& label,
                std::span<float> targets);
  // Its label alone (the scan past its sample of rows); for regression, its targets are read
  // and checked.
  Status DecodeLabel(std::string_view record, const RecordStream& file, RawLabel& label);
  // The class id of `label`: its index in class_names for a name, the id itself otherwise.
  Status Resolve(const RawLabel& label, const RecordStream& file, int32_t& id) const;

 private:
  Status SplitLine(std::string_view record, const RecordStream& file);  // into fields_
  void CsvLabel(RawLabel& label) const;                                 // from fields_
  Status ExampleLabel(std::string_view record, const RecordStream& file, RawLabel& label) const;

  // A tf.Example's `keys` into `out`, each with the width the first record had; `what`
  // ("feature" or "target") names them in messages.
  Status ExampleValues(std::string_view record, const RecordStream& file, const std::vector<FeatureKey>& keys,
                       const char* what, std::span<float> out) const;
  // CSV: the numbers of `columns` (fields_) into `out`, named by `keys` in messages.
  Status CsvValues(const RecordStream& file, const std::vector<size_t>& columns,
                   const std::vector<FeatureKey>& keys, std::span<float> out) const;

  const RowFormat& format_;
  std::vector<std::string> fields_;
  std::vector<size_t> columns_;         // CSV: the column of each feature
  std::vector<size_t> target_columns_;  // CSV: the column of each target
  std::vector<float> targets_;          // DecodeLabel's, for regression
  size_t label_column_ = 0;
  size_t header_size_ = 0;
};

// The checks a row passes before a step trains on it, in either mode: its label is below the
// model's outputs, and an embedding's ids are whole numbers in [0, vocabulary).
struct RowLimits {
  int32_t num_classes = 0;
  int64_t vocabulary = 0;  // the smallest embedding's; 0: no embedding
  std::string embedding_layer = "model.layers[0]";  // that embedding, for the message
  std::string last_layer;  // "model.layers[3]", for the message
};
// The message does not say where the row is: the caller prefixes that, on failure only.
Status CheckRow(const RowLimits& limits, std::span<const float> row, int32_t label,
                const std::vector<std::string>& feature_names, const std::string& label_name);

}  // namespace lockstep::training
