// The data of a training run: the files of data.train, data.validation and data.test (file
// patterns expanded) read into tables (CSV or TFRecord, training/data/), and the rows each role
// takes, split off the training file by stratified fractions where no separate file is given.
// In streaming mode the training files are only scanned (data_scan.h): the streaming pipeline
// reads them epoch after epoch, and validation and test come from their own files.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/status.h"
#include "training/config.h"
#include "training/data/data_scan.h"
#include "training/data/labelled_table.h"

namespace lockstep::training {

// The rows of one table an evaluation or an epoch goes through.
struct Part {
  const LabelledTable* table = nullptr;
  std::vector<int64_t> rows;
};

// The data a run trains and evaluates on: the tables read from the files (training,
// validation, test; the last two null where the roles are split from the training file), and
// the rows each role takes. Parts point into the tables, which stay where they are.
struct Dataset {
  std::array<std::unique_ptr<LabelledTable>, 3> tables;
  Part train, validation, test;  // validation, test: no table when there are none
  // Streaming: the training files' scan; tables[0] and train.table are null.
  std::optional<DataScan> scan;

  bool streaming() const { return scan.has_value(); }
  const std::vector<FeatureKey>& feature_keys() const;
  const std::vector<std::string>& class_names() const;
  const std::vector<std::string>& feature_names() const;
  // Regression's targets (empty for classification).
  const std::vector<std::string>& target_names() const;
  const std::vector<FeatureKey>& target_keys() const;
  int64_t train_rows() const;
  // The normalisation statistics of the training rows.
  FeatureStats TrainingStats() const;
  // "crc32c:..." of the training rows' features and labels, or "crc32c-records:..." of the
  // streamed files' records.
  std::string Fingerprint() const;
};

// Whether data.mode (auto: by the training files' size) streams the training files.
bool ChoosesStreaming(const DataConfig& data, const std::vector<std::string>& train_files);

// Reads (or, streaming, scans) the files, gives held-out files the training data's class ids,
// and splits off the held-out rows (stratified fractions of the training file) where no
// separate file is given.
StatusOr<Dataset> LoadDataset(const DataConfig& data);

}  // namespace lockstep::training
