// TFRecord files: TensorFlow's framing of a sequence of byte strings, used for datasets of
// tf.train.Example records and for TensorBoard event files. Each record is
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of
//   the data
// all little-endian. The reader checks both CRCs; a corrupt record is reported with the file
// and its byte offset.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep::training {

class TfRecordReader {
 public:
  struct Options {
    // A record whose data fails its CRC is skipped (and counted) instead of failing the read.
    // A damaged length or a truncated record cannot be skipped past: the rest of the file is
    // given up, also counted, with a warning.
    bool skip_corrupt = false;
  };

  static StatusOr<TfRecordReader> Open(const std::string& path, Options options);
  static StatusOr<TfRecordReader> Open(const std::string& path) { return Open(path, Options{}); }

  // The next record's data into *record: true, or false at the end of the file. DataLoss,
  // naming the file and the record's offset, for a corrupt record unless skipped.
  StatusOr<bool> Next(std::string* record);

  // The byte offset of the record Next last returned.
  int64_t last_offset() const { return last_offset_; }
  int64_t records_read() const { return records_read_; }
  int64_t corrupt_skipped() const { return corrupt_skipped_; }

 private:
  TfRecordReader(std::string path, std::unique_ptr<std::ifstream> in, Options options)
      : path_(std::move(path)), in_(std::move(in)), options_(options) {}
  // Reads exactly n bytes, or fewer at the end of the file.
  size_t Read(char* data, size_t n);

  std::string path_;
  std::unique_ptr<std::ifstream> in_;
  Options options_;
  int64_t offset_ = 0;
  int64_t last_offset_ = 0;
  int64_t records_read_ = 0;
  int64_t corrupt_skipped_ = 0;
  bool done_ = false;
};

// Appends records to a file. Each Write is framed and written through; Flush makes what was
// written visible to readers (TensorBoard polls event files while training runs).
class TfRecordWriter {
 public:
  // Creates the file, or truncates an existing one.
  static StatusOr<TfRecordWriter> Create(const std::string& path);

  Status Write(std::string_view record);
  Status Flush();

 private:
  TfRecordWriter(std::string path, std::unique_ptr<std::ofstream> out)
      : path_(std::move(path)), out_(std::move(out)) {}

  std::string path_;
  std::unique_ptr<std::ofstream> out_;
};

// The framing of one record, for tests and for writers that assemble files themselves.
std::string FrameTfRecord(std::string_view record);

}  // namespace lockstep::training
