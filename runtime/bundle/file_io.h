// Small POSIX file helpers for the bundle code: a write-only file that reports every short
// write and failed fsync, directory fsync, and errno -> Status. std::filesystem cannot fsync,
// and an unchecked close can lose the only report of a full disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

// A Status for a failed system call on `path`, coded from errno (ENOENT -> NotFound, ...).
Status ErrnoStatus(int err, std::string_view what, const std::filesystem::path& path);

// A new file opened for writing. Closes (without syncing) on destruction if Close() was not
// called; errors are only reported through Append/Sync/Close.
class WritableFile {
 public:
  // Fails if the file already exists: the writer only ever creates files in its own fresh
  // temporary directory, so an existing one means something else is writing there too.
  static StatusOr<WritableFile> Create(const std::filesystem::path& path);

  WritableFile(WritableFile&& other) noexcept;
  WritableFile& operator=(WritableFile&& other) noexcept;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;
  ~WritableFile();

  Status Append(std::span<const std::byte> data);
  Status Append(std::string_view data) { return Append(std::as_bytes(std::span(data.data(), data.size()))); }
  // fsync: the data is on stable storage before the directory that holds it is renamed.
  Status Sync();
  Status Close();

  uint64_t bytes_written() const { return bytes_written_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  WritableFile(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
  uint64_t bytes_written_ = 0;
};

// fsync a directory, making the creation, removal or renaming of its entries durable.
Status SyncDirectory(const std::filesystem::path& dir);

}  // namespace lockstep
