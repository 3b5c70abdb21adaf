// One data file read record by record, as the streaming input (streaming_pipeline.h) and the
// scan before it (data_scan.h) read it: TFRecord records (plain or gzip-compressed), or the
// data lines of a CSV file after its header. Nothing is held but the current record.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"
#include "runtime/tfrecord.h"

namespace lockstep::training {

class RecordStream {
 public:
  // `format`: "csv" or "tfrecord". A CSV file's header is read here (an empty file is an error).
  static StatusOr<RecordStream> Open(const std::string& path, const std::string& format,
                                     TfRecordReader::Options records);

  // The next record into *record (valid until the next call): true, or false at the end.
  StatusOr<bool> Next(std::string_view* record);

  const std::string& path() const { return path_; }
  bool csv() const { return !tfrecord_.has_value(); }
  // A CSV file's column names.
  const std::vector<std::string>& header() const { return header_; }
  // Where the last record is: its byte offset (TFRecord) or line number (CSV).
  int64_t position() const { return tfrecord_ ? tfrecord_->last_offset() : line_; }
  // "file: record at offset 123" or "file:17", as messages name a row.
  std::string Where() const;
  int64_t corrupt_skipped() const { return tfrecord_ ? tfrecord_->corrupt_skipped() : 0; }

 private:
  RecordStream() = default;

  std::string path_;
  std::optional<TfRecordReader> tfrecord_;
  std::unique_ptr<std::ifstream> csv_;
  std::vector<std::string> header_;
  std::string buffer_;
  int64_t line_ = 0;
};

}  // namespace lockstep::training
