// PageBuffer: a large buffer taken straight from the kernel, for the few buffers of a model
// that are its size (the weights file's image, the packed weight matrices).
//
// Why not malloc: such a buffer is written once, when a version loads, and a fault per 4 KiB
// page on first touch cost more than the copy itself (32,768 faults for 128 MiB, about a third
// of a second on our machines). Here the buffer is aligned to 2 MiB and offered to the kernel
// for transparent huge pages (madvise MADV_HUGEPAGE, which needs THP set to "madvise" or
// "always"), so it faults 2 MiB at a time; where the kernel has none to give, it is ordinary
// pages. (With THP's defrag set to "madvise", a fault may first compact memory to make a huge
// page: on a badly fragmented host a load can wait for that.) The memory comes zeroed, so no
// one needs to clear it, and goes back to the kernel whole.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/status.h"

namespace lockstep {

class PageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  PageBuffer() = default;
  // Zeroed memory of `size` bytes (size > 0), a mapping of its own: page-aligned, and
  // 2 MiB-aligned and offered huge pages when it is at least kHugePage.
  static StatusOr<PageBuffer> Allocate(size_t size);
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(addr_); }
  size_t size() const { return size_; }

  // Makes the buffer read-only: a stray write through a view is a crash, not a silent change
  // to what was verified.
  Status Protect();

 private:
  PageBuffer(void* addr, size_t size, size_t mapped) : addr_(addr), size_(size), mapped_(mapped) {}
  void* addr_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // the mapping's length: size rounded up to whole pages
};

// A zeroed, 64-byte-aligned buffer of `bytes`, owned by the returned pointer: a PageBuffer
// from kHugePage up; below, where a mapping of its own would not pay, from AllocateAligned
// (runtime/tensor.h). Throws bad_alloc, as AllocateAligned does.
std::shared_ptr<void> AllocateZeroedLarge(size_t bytes);

}  // namespace lockstep
