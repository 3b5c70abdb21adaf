#include "runtime/bundle/temporaries.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <spdlog/spdlog.h>

namespace lockstep {

namespace fs = std::filesystem;

namespace {

int OpenDirectory(const fs::path& path) {
  return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

// Whether the directory open as `fd` has not changed for `min_age` (its own mtime: a writer
// adding files to it changes it).
bool OlderThan(int fd, std::chrono::seconds min_age) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  const auto modified = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
  return std::chrono::system_clock::now() - modified >= min_age;
}

}  // namespace

StatusOr<LockedTemporaryDir> LockedTemporaryDir::Create(const fs::path& path) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    return Internal("cannot create temporary directory " + path.string() + ": " + std::strerror(errno));
  }
  const int fd = OpenDirectory(path);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    std::error_code ec;
    fs::remove(path, ec);
    return Internal("cannot lock temporary directory " + path.string() + ": " + std::strerror(error));
  }
  return LockedTemporaryDir(fd);
}

LockedTemporaryDir::LockedTemporaryDir(LockedTemporaryDir&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

LockedTemporaryDir& LockedTemporaryDir::operator=(LockedTemporaryDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

LockedTemporaryDir::~LockedTemporaryDir() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

bool IsTemporaryName(std::string_view name) {
  return name.starts_with(".tmp-");
}

std::vector<fs::path> FindStaleTemporaries(const fs::path& dir, std::chrono::seconds min_age) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!IsTemporaryName(it->path().filename().string())) continue;
    const int fd = OpenDirectory(it->path());
    if (fd < 0) continue;  // not a directory (or gone): not a writer's temporary
    // A lock taken here is only a probe: it is released at once, and a live writer holds its
    // own for its whole life, so it is never taken from one.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && OlderThan(fd, min_age)) stale.push_back(it->path());
    ::close(fd);
  }
  return stale;
}

int RemoveStaleTemporaries(const fs::path& dir, std::chrono::seconds min_age) {
  int removed = 0;
  for (const fs::path& path : FindStaleTemporaries(dir, min_age)) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) {
      spdlog::warn("event=stale_temporary action=kept path={} error=\"{}\"", path.string(), ec.message());
      continue;
    }
    spdlog::info("event=stale_temporary action=removed path={}", path.string());
    ++removed;
  }
  return removed;
}

}  // namespace lockstep
