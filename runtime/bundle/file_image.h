// A whole file read into private, read-only, page-aligned memory. Always held by shared_ptr:
// tensors viewing the weights keep the image alive through their `owner`, so it is freed when
// the last of them (or the reader) lets go, however long after ReadBundle returned.
//
// Why a copy and not a mapping of the file: a served version must not depend on its files
// staying as they were. With a mapping, a bundle truncated on disk while serving made the next
// request that touched a weight fault (SIGBUS, the end of the server), and a file rewritten in
// place changed weights after their checksum was verified. The reader reads every byte to
// check the manifest's checksums anyway; reading them into memory costs no more I/O.
//
// The image is a PageBuffer (runtime/page_buffer.h): huge pages where the kernel allows, so a
// 128 MiB file faults 64 times instead of 32,768. A caller that must look at every byte (the
// bundle reader hashes them) does so as they arrive, through `consume`, while the next part is
// read on another thread: the bytes are read from memory once, while still in cache, and the
// read and the hash overlap instead of following each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <span>

#include "runtime/page_buffer.h"
#include "runtime/status.h"

namespace lockstep {

class FileImage {
  struct Token {};  // keeps the constructor public for make_shared, yet private in effect

 public:
  // Called with the bytes read so far that it has not yet seen, in order, on the calling
  // thread, until it has seen the whole file or the read fails. If it throws, the read stops
  // and the exception reaches Read's caller.
  using ConsumeFn = std::function<void(std::span<const std::byte>)>;

  // Reads `path`, which must be a regular file (symlinks are refused) of at most `max_size`
  // bytes. A file that shrinks while it is read is DataLoss. `consume` (may be empty) sees
  // every byte of the image as it is read.
  static StatusOr<std::shared_ptr<const FileImage>> Read(
      const std::filesystem::path& path, uint64_t max_size = std::numeric_limits<uint64_t>::max(),
      const ConsumeFn& consume = {});

  FileImage(Token, std::filesystem::path path, PageBuffer buffer)
      : path_(std::move(path)), buffer_(std::move(buffer)) {}
  FileImage(const FileImage&) = delete;
  FileImage& operator=(const FileImage&) = delete;

  // Page-aligned; null for an empty file.
  const std::byte* data() const { return buffer_.data(); }
  size_t size() const { return buffer_.size(); }
  std::span<const std::byte> bytes() const { return {data(), size()}; }
  const std::filesystem::path& path() const { return path_; }

  // Whether [p, p + n) lies inside the image.
  bool Contains(const void* p, size_t n = 0) const;

 private:
  std::filesystem::path path_;
  PageBuffer buffer_;
};

}  // namespace lockstep
