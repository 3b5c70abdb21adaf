#include "runtime/bundle/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

#include "runtime/bundle/file_io.h"

namespace lockstep {

StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::filesystem::path& path,
                                                             uint64_t max_size) {
  // O_NONBLOCK so that a FIFO planted where a file belongs is refused instead of hanging us.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = ErrnoStatus(errno, "cannot stat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path.string() + " is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_size) {
    ::close(fd);
    return InvalidArgument(path.string() + " is " + std::to_string(size) + " bytes, more than the limit of " +
                           std::to_string(max_size));
  }
  void* addr = nullptr;
  if (size > 0) {
    // Read-only: nothing can write through it. It still shows later writes to the file, and
    // truncating the file makes reads past the new end fault (SIGBUS): bundles are immutable
    // once written, and are replaced by writing a new directory, never edited in place. The
    // mapping outlives the descriptor.
    addr = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      Status s = ErrnoStatus(errno, "cannot mmap", path);
      ::close(fd);
      return s;
    }
  }
  ::close(fd);
  return std::make_shared<const MappedFile>(Token{}, path, addr, static_cast<size_t>(size));
}

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

bool MappedFile::Contains(const void* p, size_t n) const {
  if (addr_ == nullptr) return false;
  // std::less gives a total order over unrelated pointers, which raw < does not promise.
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* begin = data();
  const std::byte* end = begin + size_;
  return !std::less<>()(b, begin) && !std::less<>()(end, b) && n <= static_cast<size_t>(end - b);
}

}  // namespace lockstep
