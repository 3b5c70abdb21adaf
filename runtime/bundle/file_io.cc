#include "runtime/bundle/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace lockstep {

Status ErrnoStatus(int err, std::string_view what, const std::filesystem::path& path) {
  std::string message = std::string(what) + " " + path.string() + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR: return NotFound(std::move(message));
    case EEXIST:
    case ENOTEMPTY: return AlreadyExists(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS: return Status(StatusCode::kPermissionDenied, std::move(message));
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE: return ResourceExhausted(std::move(message));
    case EIO: return DataLoss(std::move(message));
    default: return Internal(std::move(message));
  }
}

StatusOr<WritableFile> WritableFile::Create(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", path);
  return WritableFile(fd, path);
}

WritableFile::WritableFile(WritableFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)),
      bytes_written_(other.bytes_written_) {}

WritableFile& WritableFile::operator=(WritableFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    bytes_written_ = other.bytes_written_;
  }
  return *this;
}

WritableFile::~WritableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status WritableFile::Append(std::span<const std::byte> data) {
  if (fd_ < 0) return FailedPrecondition("write to closed file " + path_.string());
  const std::byte* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot write", path_);
    }
    p += n;
    left -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status WritableFile::Sync() {
  if (fd_ < 0) return FailedPrecondition("sync of closed file " + path_.string());
  if (::fsync(fd_) != 0) return ErrnoStatus(errno, "cannot fsync", path_);
  return Status::Ok();
}

Status WritableFile::Close() {
  if (fd_ < 0) return Status::Ok();
  // POSIX leaves the descriptor unspecified after a failed close; Linux always releases it,
  // so it is never retried.
  int rc = ::close(std::exchange(fd_, -1));
  if (rc != 0 && errno != EINTR) return ErrnoStatus(errno, "cannot close", path_);
  return Status::Ok();
}

Status SyncDirectory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open directory", dir);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, "cannot fsync directory", dir);
  return Status::Ok();
}

}  // namespace lockstep
