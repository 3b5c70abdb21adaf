// Reading model-server's request logs (TF Serving's PredictionLog records in TFRecord files,
// server/README.md "Request logging") as training rows, labelled afterwards by request id: the
// loop from what was served back into training (data.format "prediction_log").
//
// A logged request gives one row per instance:
//   predict_log               the request's input tensor (`input`, or its only one): dimension 0
//                             is the batch, the rest (flattened, row-major) the row's features
//                             in order, any number type read as float32
//   classify_log, regress_log, multi_inference_log
//                             each tf.Example of the request's input is a row: feature_keys'
//                             values, in order (a context's features stand in for keys the
//                             example lacks, as TF Serving merges them)
// Records without a request (another log type), and truncated records (whose values the
// server dropped, LogMetadata.truncated), are passed over and counted.
//
// Labels come from a CSV file with a header: a `request_id` column (LogMetadata.request_id: the
// client's X-Request-Id, or the one the server made), an optional `row` column (the instance's
// index within its request, from 0; without it a label is for instance 0), and the label
// column (a class id or name, as in csv_reader.h) or, for regression, the target columns. A row
// without a label is skipped and counted; a label that matches no logged row is counted too.
// A request id logged twice (a client's retry reuses its X-Request-Id) gives its rows once: the
// later records' are skipped and counted. Values that are not finite are refused, as in a CSV.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tfrecord.h"
#include "training/data/labelled_table.h"

namespace lockstep::training {

struct PredictionLogOptions {
  std::string labels_path;  // the labels CSV (required)
  std::string label = "label";
  std::vector<std::string> targets;  // regression's target columns; the label column then unused
  // predict_log: the logged input tensor; "" takes a request's only input.
  std::string input;
  // The features: keys (and widths) of a logged tf.Example, and the names of the columns of
  // a logged tensor, whose width must match. Empty: for a tensor, "<input>[i]"; for examples
  // an error.
  std::vector<FeatureKey> feature_keys;
  std::vector<std::string> feature_names;
  TfRecordReader::Options records;
};

struct PredictionLogRows {
  LabelledTable table;     // labelled rows only; class names as the labels CSV gives them
  int64_t records = 0;     // PredictionLog records read
  int64_t passed_over = 0; // records without a request, or truncated
  int64_t instances = 0;   // rows the requests held
  int64_t unlabeled = 0;   // of those, skipped: no label for them
  int64_t unmatched_labels = 0;  // labels for no logged row
  int64_t duplicates = 0;  // rows of a request id (and row) already taken: a client's retry
};

StatusOr<PredictionLogRows> ReadPredictionLogs(std::span<const std::string> paths, const PredictionLogOptions& options);

}  // namespace lockstep::training
