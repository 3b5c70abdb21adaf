// The data of a training run: the files of data.train, data.validation and data.test read
// into tables (CSV or TFRecord, training/data/), and the rows each role takes, split off the
// training file by stratified fractions where no separate file is given.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/status.h"
#include "training/config.h"
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
};

// Reads the files, gives held-out files the training file's class ids, and splits off the
// held-out rows (stratified fractions of the training file) where no separate file is given.
StatusOr<Dataset> LoadDataset(const DataConfig& data);

}  // namespace lockstep::training
