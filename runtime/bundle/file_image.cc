#include "runtime/bundle/file_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <functional>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/bundle/file_io.h"

namespace lockstep {

namespace {

// Reads [begin, end) of the file into `out` + begin.
Status ReadRange(int fd, const std::filesystem::path& path, std::byte* out, uint64_t begin, uint64_t end,
                 uint64_t size) {
  for (uint64_t done = begin; done < end;) {
    const ssize_t n = ::pread(fd, out + done, static_cast<size_t>(end - done), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot read", path);
    if (n == 0) {
      return DataLoss(path.string() + " shrank while it was read (" + std::to_string(done) + " of " +
                      std::to_string(size) + " bytes)");
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// The read is handed to the consumer in chunks this large: small enough to be in cache still
// when the consumer reads it, large enough that the hand-over costs nothing.
constexpr uint64_t kChunk = uint64_t{1} << 20;
// Below this a second thread costs more than it saves.
constexpr uint64_t kOverlapFrom = uint64_t{8} << 20;

// Reads the file into `out` on a helper thread, a chunk at a time, while this thread gives
// each chunk to `consume` as soon as it is in. The helper publishes how far it has read; a
// failure publishes kFailed, and its status is read only after the join. If the consumer
// throws, the helper is told to stop and joined before the exception goes on. A helper that
// cannot be started (the process is at its thread limit) leaves the read to this thread alone.
Status ReadOverlapped(int fd, const std::filesystem::path& path, std::byte* out, uint64_t size,
                      const FileImage::ConsumeFn& consume) {
  constexpr uint64_t kFailed = ~uint64_t{0};
  std::atomic<uint64_t> read_to{0};
  std::atomic<bool> cancelled{false};
  Status read_status;
  auto read_all = [&]() noexcept {
    try {
      for (uint64_t begin = 0; begin < size && !cancelled.load(std::memory_order_relaxed); begin += kChunk) {
        const uint64_t end = std::min(size, begin + kChunk);
        read_status = ReadRange(fd, path, out, begin, end, size);
        if (!read_status.ok()) break;
        read_to.store(end, std::memory_order_release);
        read_to.notify_one();
      }
    } catch (const std::bad_alloc&) {
      read_status = ResourceExhausted("out of memory while reading " + path.string());
    }
    if (!read_status.ok()) {
      read_to.store(kFailed, std::memory_order_release);
      read_to.notify_one();
    }
  };
  std::thread reader;
  try {
    reader = std::thread(read_all);
  } catch (const std::system_error&) {
    LS_RETURN_IF_ERROR(ReadRange(fd, path, out, 0, size, size));
    consume(std::span<const std::byte>(out, static_cast<size_t>(size)));
    return Status::Ok();
  }
  // On every way out, a consumer's exception included: a joinable thread's destructor would
  // end the process, and the helper must not write into memory the caller is about to free.
  struct Joiner {
    std::thread& thread;
    std::atomic<bool>& cancelled;
    ~Joiner() {
      cancelled.store(true, std::memory_order_relaxed);
      if (thread.joinable()) thread.join();
    }
  } joiner{reader, cancelled};
  for (uint64_t consumed = 0; consumed < size;) {
    const uint64_t available = read_to.load(std::memory_order_acquire);
    if (available == kFailed) break;
    if (available == consumed) {
      read_to.wait(consumed, std::memory_order_acquire);
      continue;
    }
    consume(std::span<const std::byte>(out + consumed, static_cast<size_t>(available - consumed)));
    consumed = available;
  }
  reader.join();
  return read_status;
}

// An open descriptor of a regular file, and the file's size when it was opened.
struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  OpenFile() = default;
  OpenFile(OpenFile&& other) noexcept : fd(std::exchange(other.fd, -1)), size(other.size) {}
  OpenFile& operator=(OpenFile&&) = delete;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

StatusOr<OpenFile> OpenRegularFile(const std::filesystem::path& path) {
  OpenFile file;
  // O_NONBLOCK so that a FIFO planted where a file belongs is refused instead of hanging us.
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (file.fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path.string() + " is not a regular file");
  file.size = static_cast<uint64_t>(st.st_size);
  return file;
}

// The image for `what` (a file, or a set of parts), `size` bytes.
StatusOr<PageBuffer> AllocateImage(const std::string& what, uint64_t size) {
  if (size > std::numeric_limits<size_t>::max()) return InvalidArgument(what + " is too large to read");
  StatusOr<PageBuffer> buffer = PageBuffer::Allocate(static_cast<size_t>(size));
  if (!buffer.ok()) return buffer.status().WithPrefix(what);
  return buffer;
}

// Reads the first `size` bytes of `path` into `out`, giving each chunk to `consume` as it
// comes in, on this thread.
Status ReadPart(const std::filesystem::path& path, std::byte* out, uint64_t size, const FileImage::ConsumeFn& consume) {
  LS_ASSIGN_OR_RETURN(OpenFile file, OpenRegularFile(path));
  for (uint64_t begin = 0; begin < size; begin += kChunk) {
    const uint64_t end = std::min(size, begin + kChunk);
    LS_RETURN_IF_ERROR(ReadRange(file.fd, path, out, begin, end, size));
    consume(std::span<const std::byte>(out + begin, static_cast<size_t>(end - begin)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<const FileImage>> FileImage::Read(const std::filesystem::path& path, uint64_t max_size,
                                                           const ConsumeFn& consume) {
  LS_ASSIGN_OR_RETURN(OpenFile file, OpenRegularFile(path));
  const uint64_t size = file.size;
  if (size > max_size) {
    return InvalidArgument(path.string() + " is " + std::to_string(size) + " bytes, more than the limit of " +
                           std::to_string(max_size));
  }
  if (size == 0) return std::make_shared<const FileImage>(Token{}, path, PageBuffer());
  LS_ASSIGN_OR_RETURN(PageBuffer buffer, AllocateImage(path.string(), size));
  std::byte* out = buffer.data();
  if (consume && size >= kOverlapFrom) {
    LS_RETURN_IF_ERROR(ReadOverlapped(file.fd, path, out, size, consume));
  } else {
    LS_RETURN_IF_ERROR(ReadRange(file.fd, path, out, 0, size, size));
    if (consume) consume(std::span<const std::byte>(out, static_cast<size_t>(size)));
  }
  LS_RETURN_IF_ERROR(buffer.Protect().WithPrefix(path.string()));
  return std::make_shared<const FileImage>(Token{}, path, std::move(buffer));
}

StatusOr<std::shared_ptr<const FileImage>> FileImage::ReadParts(std::span<const std::filesystem::path> paths,
                                                                uint64_t max_size, const PartConsumeFn& consume,
                                                                unsigned max_threads) {
  if (paths.empty()) return InvalidArgument("no files to read");
  if (paths.size() == 1) {
    return Read(paths[0], max_size, [&consume](std::span<const std::byte> bytes) { consume(0, bytes); });
  }
  // Where each part starts in the image; the sizes are taken now, and a part that shrinks
  // before it is read is DataLoss like any file that shrinks while it is read.
  std::vector<uint64_t> begin(paths.size() + 1, 0);
  for (size_t k = 0; k < paths.size(); ++k) {
    LS_ASSIGN_OR_RETURN(OpenFile file, OpenRegularFile(paths[k]));
    if (file.size > std::numeric_limits<size_t>::max() - begin[k]) {
      return InvalidArgument(paths[k].string() + " takes the parts past what this machine can address");
    }
    begin[k + 1] = begin[k] + file.size;
  }
  const uint64_t total = begin.back();
  const std::string parts = paths[0].string() + " and the " + std::to_string(paths.size() - 1) + " parts after it";
  if (total > max_size) {
    return InvalidArgument(parts + " hold " + std::to_string(total) + " bytes, more than the limit of " +
                           std::to_string(max_size));
  }
  if (total == 0) return std::make_shared<const FileImage>(Token{}, paths[0], PageBuffer());
  LS_ASSIGN_OR_RETURN(PageBuffer buffer, AllocateImage(parts, total));
  std::byte* out = buffer.data();

  std::vector<Status> failures(paths.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  // Each thread takes the next unread part, reads it a chunk at a time, and hands each chunk
  // to the consumer while it is still in this core's cache.
  auto read_parts = [&]() noexcept {
    for (size_t k; !failed.load(std::memory_order_relaxed) && (k = next.fetch_add(1)) < paths.size();) {
      Status s;
      try {
        s = ReadPart(paths[k], out + begin[k], begin[k + 1] - begin[k],
                     [&consume, k](std::span<const std::byte> bytes) { consume(k, bytes); });
      } catch (const std::bad_alloc&) {
        s = ResourceExhausted("out of memory while reading " + paths[k].string());
      }
      if (!s.ok()) {
        failures[k] = std::move(s);
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(paths.size(), max_threads == 0 ? cores : max_threads);
  std::vector<std::jthread> helpers;
  helpers.reserve(threads);
  for (size_t i = 1; i < threads; ++i) {
    try {
      helpers.emplace_back(read_parts);
    } catch (const std::system_error&) {
      break;  // at the process's thread limit: the threads already running read every part
    }
  }
  read_parts();
  helpers.clear();  // joins
  for (Status& s : failures) {
    if (!s.ok()) return std::move(s);
  }
  LS_RETURN_IF_ERROR(buffer.Protect().WithPrefix(parts));
  return std::make_shared<const FileImage>(Token{}, paths[0], std::move(buffer));
}

bool FileImage::Contains(const void* p, size_t n) const {
  if (data() == nullptr) return false;
  // std::less gives a total order over unrelated pointers, which raw < does not promise.
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* begin = data();
  const std::byte* end = begin + size();
  return !std::less<>()(b, begin) && !std::less<>()(end, b) && n <= static_cast<size_t>(end - b);
}

}  // namespace lockstep
