// The one pass over the training files that streaming needs before its first epoch, since it
// never holds the data: how many records each file has (so that every worker knows every
// shard's length, and so the epoch's), what a row is (features, widths, class names or
// regression's targets), the normalisation statistics, and a fingerprint of the bytes. Every
// worker makes the same pass over all the files and so reaches the same numbers, bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "training/config.h"
#include "training/data/feature_stats.h"
#include "training/data/row_decoder.h"
#include "runtime/tfrecord.h"

namespace lockstep::training {

struct DataScan {
  std::vector<std::string> files;
  std::vector<int64_t> records;  // per file: the records an epoch reads (corrupt ones skipped)
  RowFormat format;              // class_names: those of the decoded rows, sorted
  FeatureStats stats;
  int64_t stats_rows = 0;  // the rows the statistics and classes come from
  int64_t bytes = 0;       // the records' bytes
  uint32_t fingerprint = 0;  // CRC-32C over every record's bytes, in file order

  int64_t total_records() const;
};

// How data.compression reads TFRecord files.
TfRecordReader::Options RecordOptions(const DataConfig& data);

// Decodes the first data.stats_sample records (every one when 0) for the statistics and the
// classes, and frames and counts the rest. Errors name the file and the record.
StatusOr<DataScan> ScanTrainingFiles(const DataConfig& data, const std::vector<std::string>& files);

}  // namespace lockstep::training
