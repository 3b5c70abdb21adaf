// The file collector's files: TFRecord files of PredictionLog records (the format of a warm-up
// file, so that a log cut down is a warm-up file), one file at a time per filename prefix.
//
// A file is written as <prefix>.<UTC time it opened, 20261207T101500Z>.<sequence, 6 digits>.tfrecord.partial
// and renamed without ".partial" when it closes: when it would pass its size, when it has been
// open longer than its age, and when the server drains. A reader that globs *.tfrecord
// therefore sees only whole files of whole records. No name is ever taken twice: a file is
// opened only where neither name exists (O_EXCL), and given its final name by link(), which
// fails rather than replace a file; a taken name moves on to the next sequence number (a
// server restarted within the same second, a prefix that left the config and came back).
//
// A failed write (the directory gone, the disk full, a file size limit) loses the records
// buffered since the last good write, cuts the file back to its last whole record and closes it,
// and the next record tries again (directories made anew) no sooner than a second later; the
// records that arrive in between fail at once. Nothing here throws or blocks a request: the
// request logger's writer thread is the only caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

struct LogFileLimits {
  int64_t max_file_bytes = int64_t{64} << 20;  // a file closes before a record would take it past this
  std::chrono::seconds max_file_age{300};      // and once it has been open this long
};

class RotatingLogFile {
 public:
  RotatingLogFile(std::string prefix, LogFileLimits limits) : prefix_(std::move(prefix)), limits_(limits) {}
  ~RotatingLogFile();  // Close()
  RotatingLogFile(const RotatingLogFile&) = delete;
  RotatingLogFile& operator=(const RotatingLogFile&) = delete;

  // Buffers one record (framed as TFRecord), opening or rotating the file first as needed.
  // An error says the record is lost (the file could not be opened, or is in its back-off).
  // `*lost`: records buffered before it that a rotation's write lost.
  Status Append(std::string_view record, std::chrono::steady_clock::time_point now, int64_t* lost);
  // Writes what is buffered. On failure, the error and how many records it lost.
  Status Flush(int64_t* lost);
  // Closes (and renames) the file when it is older than its age; Flush first.
  Status CloseIfOld(std::chrono::steady_clock::time_point now, int64_t* lost);
  // Flushes and closes the file, renaming it to its final name.
  Status Close(int64_t* lost);

  const std::string& prefix() const { return prefix_; }
  // The file being written (its .partial name); empty while none is open.
  const std::string& open_path() const { return partial_path_; }
  int64_t buffered_records() const { return buffered_records_; }

 private:
  Status Open(std::chrono::steady_clock::time_point now);
  // The next <prefix>.<stamp>.<sequence>.tfrecord name.
  std::string NextFinalPath();
  // Gives the closed .partial file its final name, never over another file.
  Status Publish();
  // Cuts the file back to its last whole record and closes it; the back-off starts.
  void Fail(std::chrono::steady_clock::time_point now);

  const std::string prefix_;
  const LogFileLimits limits_;
  int fd_ = -1;
  std::string partial_path_;
  std::string stamp_;  // the UTC second the file opened
  int64_t sequence_ = 0;
  int64_t written_bytes_ = 0;  // whole records in the file
  std::chrono::steady_clock::time_point opened_;
  std::chrono::steady_clock::time_point retry_after_;
  std::string buffer_;  // framed records not yet written
  int64_t buffered_records_ = 0;
};

}  // namespace lockstep
