#include "server/request_log/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "runtime/tfrecord.h"

namespace lockstep {
namespace {

constexpr auto kRetryWait = std::chrono::seconds(1);
constexpr size_t kFramingBytes = 16;  // length, its CRC, the data's CRC

std::string UtcStamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  return stamp;
}

std::string FinalPath(const std::string& partial) { return partial.substr(0, partial.size() - 8); }

}  // namespace

RotatingLogFile::~RotatingLogFile() {
  int64_t lost = 0;
  (void)Close(&lost);
}

Status RotatingLogFile::Open(std::chrono::steady_clock::time_point now) {
  if (now < retry_after_) return Status(StatusCode::kUnavailable, "request log '" + prefix_ + "': the last write failed; retrying soon");
  const std::filesystem::path parent = std::filesystem::path(prefix_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  stamp_ = UtcStamp();
  for (int attempt = 0; attempt < 1000; ++attempt) {
    // Neither name may be taken: a file of the same prefix written in the same second (by this
    // server before a restart or a reload, or by another) keeps its records.
    const std::string final_path = NextFinalPath();
    if (std::filesystem::exists(final_path, ec)) continue;
    std::string path = final_path + ".partial";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fd_ = fd;
      partial_path_ = std::move(path);
      written_bytes_ = 0;
      opened_ = now;
      spdlog::info("event=request_log_opened path={}", partial_path_);
      return Status::Ok();
    }
    const int error_number = errno;
    if (error_number == EEXIST) continue;
    const std::string error = std::strerror(error_number);
    retry_after_ = now + kRetryWait;
    spdlog::warn("event=request_log_failed prefix={} path={} error=\"{}\"", prefix_, path, error);
    return Status(StatusCode::kUnavailable, "request log '" + path + "': cannot create: " + error);
  }
  retry_after_ = now + kRetryWait;
  return Status(StatusCode::kUnavailable, "request log '" + prefix_ + "': no free file name for " + stamp_);
}

Status RotatingLogFile::Append(std::string_view record, std::chrono::steady_clock::time_point now, int64_t* lost) {
  *lost = 0;
  const int64_t framed = static_cast<int64_t>(record.size() + kFramingBytes);
  if (fd_ >= 0) {
    const int64_t size = written_bytes_ + static_cast<int64_t>(buffer_.size());
    const bool full = size > 0 && size + framed > limits_.max_file_bytes;
    if (full || now - opened_ >= limits_.max_file_age) (void)Close(lost);
  }
  if (fd_ < 0) LS_RETURN_IF_ERROR(Open(now));
  AppendTfRecord(record, &buffer_);
  ++buffered_records_;
  return Status::Ok();
}

Status RotatingLogFile::Flush(int64_t* lost) {
  *lost = 0;
  if (buffer_.empty()) return Status::Ok();
  if (fd_ < 0) {
    *lost = buffered_records_;
    buffer_.clear();
    buffered_records_ = 0;
    return Status(StatusCode::kUnavailable, "request log '" + prefix_ + "': no file open");
  }
  // A file whose directory was removed takes writes that no reader will ever see: that is a
  // failure too, and the next record opens a new file (its directories made anew).
  struct stat st{};
  if (::fstat(fd_, &st) == 0 && st.st_nlink == 0) {
    spdlog::warn("event=request_log_failed prefix={} path={} records_lost={} error=\"the file was removed\"",
                 prefix_, partial_path_, buffered_records_);
    *lost = buffered_records_;
    buffer_.clear();
    buffered_records_ = 0;
    ::close(fd_);
    fd_ = -1;
    partial_path_.clear();
    return Status(StatusCode::kUnavailable, "request log '" + prefix_ + "': the file was removed");
  }
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = n < 0 ? std::strerror(errno) : "no progress";
      spdlog::warn("event=request_log_failed prefix={} path={} records_lost={} error=\"{}\"", prefix_, partial_path_,
                   buffered_records_, error);
      *lost = buffered_records_;
      Fail(std::chrono::steady_clock::now());
      return Status(StatusCode::kUnavailable, "request log '" + prefix_ + "': write failed: " + error);
    }
    done += static_cast<size_t>(n);
  }
  written_bytes_ += static_cast<int64_t>(buffer_.size());
  buffer_.clear();
  buffered_records_ = 0;
  return Status::Ok();
}

void RotatingLogFile::Fail(std::chrono::steady_clock::time_point now) {
  // What the file holds up to written_bytes_ is whole records; the rest is a torn write.
  if (::ftruncate(fd_, written_bytes_) != 0) {
    spdlog::warn("event=request_log_truncate_failed path={} error=\"{}\"", partial_path_, std::strerror(errno));
  }
  buffer_.clear();
  buffered_records_ = 0;
  retry_after_ = now + kRetryWait;
  int64_t none = 0;
  (void)Close(&none);
}

Status RotatingLogFile::CloseIfOld(std::chrono::steady_clock::time_point now, int64_t* lost) {
  *lost = 0;
  if (fd_ < 0 || now - opened_ < limits_.max_file_age) return Status::Ok();
  return Close(lost);
}

std::string RotatingLogFile::NextFinalPath() {
  char sequence[24];
  std::snprintf(sequence, sizeof sequence, "%06lld", static_cast<long long>(++sequence_));
  return prefix_ + "." + stamp_ + "." + sequence + ".tfrecord";
}

Status RotatingLogFile::Publish() {
  // link() fails when the final name is taken (rename() would replace that file): then the
  // next sequence number. A file system without hard links takes a checked rename instead.
  std::string final_path = FinalPath(partial_path_);
  std::error_code ec;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int rc = ::link(partial_path_.c_str(), final_path.c_str());
    if (rc != 0 && (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP) &&
        !std::filesystem::exists(final_path, ec)) {
      rc = std::rename(partial_path_.c_str(), final_path.c_str());
    } else if (rc == 0) {
      ::unlink(partial_path_.c_str());
    }
    if (rc == 0) {
      spdlog::info("event=request_log_closed path={} bytes={}", final_path, written_bytes_);
      return Status::Ok();
    }
    const int error_number = errno;
    if (error_number != EEXIST) {
      const std::string error = std::strerror(error_number);
      spdlog::warn("event=request_log_failed path={} error=\"cannot rename to {}: {}; the records stay in the "
                   "partial file\"",
                   partial_path_, final_path, error);
      return Status(StatusCode::kUnavailable, "request log '" + partial_path_ + "': cannot rename: " + error);
    }
    final_path = NextFinalPath();
  }
  return Status(StatusCode::kUnavailable, "request log '" + partial_path_ + "': no free final name");
}

Status RotatingLogFile::Close(int64_t* lost) {
  *lost = 0;
  if (fd_ < 0) return Status::Ok();
  Status status = Flush(lost);
  if (fd_ < 0) return status;  // the flush failed and closed it
  ::close(fd_);
  fd_ = -1;
  if (written_bytes_ == 0) {
    ::unlink(partial_path_.c_str());  // an empty file is no use to a reader
  } else {
    status = Publish();
  }
  partial_path_.clear();
  written_bytes_ = 0;
  return status;
}

}  // namespace lockstep
