#include "runtime/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "runtime/tensor.h"

namespace lockstep {

namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

StatusOr<PageBuffer> PageBuffer::Allocate(size_t size) {
  if (size == 0) return InvalidArgument("PageBuffer::Allocate: size 0");
  // Room for the rounding and the alignment slack below, so that neither wraps.
  if (size > std::numeric_limits<size_t>::max() - 2 * kHugePage) {
    return ResourceExhausted("cannot map " + std::to_string(size) + " bytes: too large");
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t mapped = RoundUp(size, page);
  if (mapped < kHugePage) {
    void* addr = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) return ResourceExhausted("cannot map " + std::to_string(size) + " bytes: " + std::strerror(errno));
    return PageBuffer(addr, size, mapped);
  }
  // mmap promises only page alignment: map a huge page more and give back the slack on both
  // sides, so that every 2 MiB of the buffer can be one huge page.
  const size_t padded = mapped + kHugePage;
  void* raw = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return ResourceExhausted("cannot map " + std::to_string(size) + " bytes: " + std::strerror(errno));
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(base, kHugePage);
  if (aligned > base) ::munmap(raw, aligned - base);
  const uintptr_t tail = aligned + mapped;
  if (base + padded > tail) ::munmap(reinterpret_cast<void*>(tail), base + padded - tail);
  void* addr = reinterpret_cast<void*>(aligned);
  // Advice only: a kernel without THP (or with it off) serves ordinary pages, as before.
  (void)::madvise(addr, mapped, MADV_HUGEPAGE);
  return PageBuffer(addr, size, mapped);
}

PageBuffer::~PageBuffer() {
  if (addr_ != nullptr) ::munmap(addr_, mapped_);
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    if (addr_ != nullptr) ::munmap(addr_, mapped_);
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

Status PageBuffer::Protect() {
  if (addr_ == nullptr || ::mprotect(addr_, mapped_, PROT_READ) == 0) return Status::Ok();
  return Internal(std::string("cannot make memory read-only: ") + std::strerror(errno));
}

std::shared_ptr<void> AllocateZeroedLarge(size_t bytes) {
  if (bytes < PageBuffer::kHugePage) return AllocateAligned(bytes);
  StatusOr<PageBuffer> buffer = PageBuffer::Allocate(bytes);
  if (!buffer.ok()) throw std::bad_alloc();
  auto owner = std::make_shared<PageBuffer>(std::move(buffer).value());
  void* data = owner->data();
  // Aliasing constructor: the pointer is the memory, the owner the mapping.
  return std::shared_ptr<void>(std::move(owner), data);
}

}  // namespace lockstep
