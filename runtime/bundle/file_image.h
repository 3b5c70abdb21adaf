// A whole file read into private, read-only, page-aligned memory. Always held by shared_ptr:
// tensors viewing the weights keep the image alive through their `owner`, so it is freed when
// the last of them (or the reader) lets go, however long after ReadBundle returned.
//
// Why a copy and not a mapping of the file: a served version must not depend on its files
// staying as they were. With a mapping, a bundle truncated on disk while serving made the next
// request that touched a weight fault (SIGBUS, the end of the server), and a file rewritten in
// place changed weights after their checksum was verified. The reader reads every byte to
// check the manifest's checksums anyway; reading them into memory costs no more I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>

#include "runtime/status.h"

namespace lockstep {

class FileImage {
  struct Token {};  // keeps the constructor public for make_shared, yet private in effect

 public:
  // Reads `path`, which must be a regular file (symlinks are refused) of at most `max_size`
  // bytes. A file that shrinks while it is read is DataLoss.
  static StatusOr<std::shared_ptr<const FileImage>> Read(
      const std::filesystem::path& path, uint64_t max_size = std::numeric_limits<uint64_t>::max());

  FileImage(Token, std::filesystem::path path, void* addr, size_t size)
      : path_(std::move(path)), addr_(addr), size_(size) {}
  ~FileImage();
  FileImage(const FileImage&) = delete;
  FileImage& operator=(const FileImage&) = delete;

  // Page-aligned; null for an empty file.
  const std::byte* data() const { return static_cast<const std::byte*>(addr_); }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data(), size_}; }
  const std::filesystem::path& path() const { return path_; }

  // Whether [p, p + n) lies inside the image.
  bool Contains(const void* p, size_t n = 0) const;

 private:
  std::filesystem::path path_;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lockstep
