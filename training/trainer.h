// A whole training run, as model-train performs it: read and split the data, build the model's
// graphs, train epoch after epoch (one progress line each), evaluate on the held-out rows
// through the serving graph, and export that graph as a bundle into <export.dir>/<version>/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "training/config.h"
#include "training/workers.h"

namespace lockstep::training {

struct TrainReport {
  int64_t steps = 0;
  double train_loss = 0, train_accuracy = 0;  // the last epoch's, over its batches
  // Regression's metrics in place of the accuracies: mean squared and mean absolute error,
  // over the rows and the target values.
  double train_mse = 0, train_mae = 0;
  bool has_validation = false, has_test = false;
  double validation_accuracy = 0, validation_loss = 0;  // the exported weights'
  double validation_mse = 0, validation_mae = 0;
  double test_accuracy = 0, test_loss = 0;
  double test_mse = 0, test_mae = 0;
  std::string export_path;     // "" when the config names no export dir
  bool stopped_early = false;  // TrainOptions::stop_after_steps ended the run
  // With keep_test_predictions: the test rows' features and the exported model's
  // probabilities (regression: outputs) for them, row-major, as model-train's own evaluation
  // computed them. num_classes: the model's outputs (regression: its target values).
  int64_t num_features = 0, num_classes = 0;
  bool regression = false;
  std::vector<float> test_features, test_probabilities;
};

struct TrainOptions {
  // Fill TrainReport::test_features and test_probabilities.
  bool keep_test_predictions = false;
  // Continue from the newest checkpoint in checkpoint.dir (from the start when there is none).
  bool resume = false;
  // Stop once this many optimiser steps are done (writing a checkpoint when checkpoint.dir
  // is set), without evaluating or exporting: a run cut short, as by a time limit. 0: no limit.
  int64_t stop_after_steps = 0;
  // The processes of a multi-worker run (workers.h); null: this process alone. Rank 0 writes
  // the checkpoints, the TensorBoard events and the export, and evaluates; the other ranks
  // train on their shards and return a report without metrics.
  Workers* workers = nullptr;
};

// `model_name` goes into the bundle's metadata. Errors name the file and field at fault.
StatusOr<TrainReport> Train(const TrainConfig& config, const std::string& model_name,
                            const TrainOptions& options = {});

}  // namespace lockstep::training
