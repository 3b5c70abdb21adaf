// TFRecord files: TensorFlow's framing of a sequence of byte strings, used for datasets of
// tf.train.Example records and for TensorBoard event files. Each record is
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of
//   the data
// all little-endian. The reader checks both CRCs; a corrupt record is reported with the file
// and its byte offset. It also reads files gzip-compressed as a whole, as TensorFlow writes
// them with compression_type "GZIP" (offsets are then in the decompressed stream).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/status.h"

namespace lockstep {

class TfRecordReader {
 public:
  struct Options {
    // A record whose data fails its CRC is skipped (and counted) instead of failing the read.
    // A damaged length or a truncated record cannot be skipped past: the rest of the file is
    // given up, also counted, with a warning.
    bool skip_corrupt = false;
    // kAuto: gzip when the file starts with gzip's magic bytes and method (1f 8b 08), which a
    // plain TFRecord file does only if its first record is 559,903 bytes plus a multiple of
    // 2^24; kNone or kGzip say so.
    enum class Compression { kAuto, kNone, kGzip };
    Compression compression = Compression::kAuto;
  };

  static StatusOr<TfRecordReader> Open(const std::string& path, Options options);
  static StatusOr<TfRecordReader> Open(const std::string& path) { return Open(path, Options{}); }

  // The next record's data into *record: true, or false at the end of the file. DataLoss,
  // naming the file and the record's offset, for a corrupt record unless skipped.
  StatusOr<bool> Next(std::string* record);

  const std::string& path() const { return path_; }
  bool compressed() const { return gz_ != nullptr; }
  // The byte offset of the record Next last returned.
  int64_t last_offset() const { return last_offset_; }
  int64_t records_read() const { return records_read_; }
  int64_t corrupt_skipped() const { return corrupt_skipped_; }

 private:
  struct GzClose {
    void operator()(gzFile f) const { gzclose(f); }
  };
  using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzClose>;

  TfRecordReader(std::string path, std::unique_ptr<std::ifstream> in, GzFile gz, Options options)
      : path_(std::move(path)), in_(std::move(in)), gz_(std::move(gz)), options_(options) {}
  // Reads exactly n bytes, or fewer at the end of the file (or on a read error: error_ says).
  size_t Read(char* data, size_t n);

  std::string path_;
  std::unique_ptr<std::ifstream> in_;  // a plain file
  GzFile gz_;                          // or a gzip-compressed one
  std::string error_;                  // what a failed read of a compressed file said
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
// The same framing appended to `out` (whose capacity a writer reuses).
void AppendTfRecord(std::string_view record, std::string* out);

}  // namespace lockstep
