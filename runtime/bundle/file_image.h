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
// read and the hash overlap instead of following each other. Several files (a bundle's weight
// shards) can be read into one image, end to end, on one thread per core (ReadParts).
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

  // Called with bytes of part `part` (an index into ReadParts' paths) as they are read: every
  // byte of each part once, in order within the part, on whichever thread read it. Calls for
  // different parts may run at the same time. It must not throw.
  using PartConsumeFn = std::function<void(size_t part, std::span<const std::byte>)>;

  // Reads `paths` (at least one, each as Read would take it, together at most `max_size`
  // bytes) into one image holding their bytes end to end, the parts at once on up to
  // `max_threads` threads (this one included; 0 means one per core). A single part is read as
  // Read reads it. Errors name the part; after one part fails no other is started, and of those
  // that failed the first in `paths` is reported. The image's path() is the first part's.
  static StatusOr<std::shared_ptr<const FileImage>> ReadParts(std::span<const std::filesystem::path> paths,
                                                              uint64_t max_size, const PartConsumeFn& consume,
                                                              unsigned max_threads = 0);

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
