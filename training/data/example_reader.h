// Reading TFRecord files of tf.train.Example records into a LabelledTable.
//
// Each feature key names a float_list or int64_list (int64 values become float32); a key may
// hold several values (an image's pixels), and then every example must hold as many as the
// first. The label key holds one value: an int64 class id (>= 0), or bytes, a class name
// (names get ids in sorted order, as in csv_reader.h). Errors name the file, the record's
// byte offset and the key.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "training/data/labelled_table.h"
#include "runtime/tfrecord.h"

namespace lockstep::training {

struct ExampleOptions {
  std::string label_key = "label";
  // Regression: the target keys (float or int64 lists, as the features); the label key is
  // then not read and every row's label is 0.
  std::vector<std::string> target_keys;
  // The features, in this order (an Example's features are a map, with no order of its own).
  std::vector<std::string> feature_keys;
  TfRecordReader::Options records;
};

// Reads every record of every file, in order.
StatusOr<LabelledTable> ReadExamples(std::span<const std::string> paths, const ExampleOptions& options);

}  // namespace lockstep::training
