#include "runtime/bundle/file_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

#include "runtime/bundle/file_io.h"

namespace lockstep {

namespace {

// Closes the descriptor on every path out of Read.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

StatusOr<std::shared_ptr<const FileImage>> FileImage::Read(const std::filesystem::path& path,
                                                           uint64_t max_size) {
  // O_NONBLOCK so that a FIFO planted where a file belongs is refused instead of hanging us.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path.string() + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_size) {
    return InvalidArgument(path.string() + " is " + std::to_string(size) + " bytes, more than the limit of " +
                           std::to_string(max_size));
  }
  if (size == 0) return std::make_shared<const FileImage>(Token{}, path, nullptr, 0);

  // Anonymous pages: page-aligned (weights are viewed in place, at 64-byte offsets), freed
  // whole with munmap, and made read-only once filled.
  void* addr =
      ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) return ErrnoStatus(errno, "cannot allocate memory for", path);
  auto image = std::make_shared<const FileImage>(Token{}, path, addr, static_cast<size_t>(size));
  auto* out = static_cast<char*>(addr);
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, out + done, static_cast<size_t>(size - done), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot read", path);
    if (n == 0) {
      return DataLoss(path.string() + " shrank while it was read (" + std::to_string(done) + " of " +
                      std::to_string(size) + " bytes)");
    }
    done += static_cast<uint64_t>(n);
  }
  if (::mprotect(addr, static_cast<size_t>(size), PROT_READ) != 0)
    return ErrnoStatus(errno, "cannot protect", path);
  return image;
}

FileImage::~FileImage() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

bool FileImage::Contains(const void* p, size_t n) const {
  if (addr_ == nullptr) return false;
  // std::less gives a total order over unrelated pointers, which raw < does not promise.
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* begin = data();
  const std::byte* end = begin + size_;
  return !std::less<>()(b, begin) && !std::less<>()(end, b) && n <= static_cast<size_t>(end - b);
}

}  // namespace lockstep
