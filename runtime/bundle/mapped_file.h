// A read-only memory mapping of a whole file. Always held by shared_ptr: tensors viewing the
// weights keep the mapping alive through their `owner`, so it is unmapped when the last of
// them (or the reader) lets go, however long after ReadBundle returned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>

#include "runtime/status.h"

namespace lockstep {

class MappedFile {
  struct Token {};  // keeps the constructor public for make_shared, yet private in effect

 public:
  // Maps `path`, which must be a regular file (symlinks are refused) of at most `max_size`
  // bytes. An empty file gives an empty mapping (mmap cannot map zero bytes).
  static StatusOr<std::shared_ptr<const MappedFile>> Open(
      const std::filesystem::path& path, uint64_t max_size = std::numeric_limits<uint64_t>::max());

  MappedFile(Token, std::filesystem::path path, void* addr, size_t size)
      : path_(std::move(path)), addr_(addr), size_(size) {}
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Page-aligned; null for an empty file.
  const std::byte* data() const { return static_cast<const std::byte*>(addr_); }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data(), size_}; }
  const std::filesystem::path& path() const { return path_; }

  // Whether [p, p + n) lies inside the mapping.
  bool Contains(const void* p, size_t n = 0) const;

 private:
  std::filesystem::path path_;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lockstep
