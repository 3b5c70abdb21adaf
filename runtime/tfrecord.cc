#include "runtime/tfrecord.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/crc32c.h"

namespace lockstep {
namespace {

void PutLittleEndian(uint64_t v, int bytes, std::string& out) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// A record longer than this is taken for a damaged length: no dataset example or event comes
// near it, and trusting a damaged length could ask for terabytes.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 31;

}  // namespace

std::string FrameTfRecord(std::string_view record) {
  std::string out;
  out.reserve(record.size() + 16);
  AppendTfRecord(record, &out);
  return out;
}

void AppendTfRecord(std::string_view record, std::string* out) {
  const size_t start = out->size();
  PutLittleEndian(record.size(), 8, *out);
  PutLittleEndian(MaskCrc32c(Crc32c(std::string_view(out->data() + start, 8))), 4, *out);
  out->append(record);
  PutLittleEndian(MaskCrc32c(Crc32c(record)), 4, *out);
}

StatusOr<TfRecordReader> TfRecordReader::Open(const std::string& path, Options options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgument("'" + path + "' is a directory, not a TFRecord file");
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  bool gzip = options.compression == Options::Compression::kGzip;
  if (options.compression == Options::Compression::kAuto) {
    char magic[3] = {};
    in->read(magic, 3);
    gzip = in->gcount() == 3 && magic[0] == '\x1f' && magic[1] == '\x8b' && magic[2] == '\x08';
    in->clear();
    in->seekg(0);
  }
  if (!gzip) return TfRecordReader(path, std::move(in), nullptr, options);
  in.reset();
  GzFile gz(gzopen(path.c_str(), "rb"));
  if (gz == nullptr) return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  gzbuffer(gz.get(), 1 << 17);  // fewer, larger reads of the compressed file
  // Told gzip, zlib would read a plain file through as it is (gzdirect looks ahead to say so).
  if (gzdirect(gz.get()) == 1 && std::filesystem::file_size(path, ec) > 0) {
    return InvalidArgument("'" + path + "' is not gzip-compressed (data.compression is \"gzip\")");
  }
  return TfRecordReader(path, nullptr, std::move(gz), options);
}

size_t TfRecordReader::Read(char* data, size_t n) {
  if (in_ != nullptr) {
    in_->read(data, static_cast<std::streamsize>(n));
    return static_cast<size_t>(in_->gcount());
  }
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(gz_.get(), data + done, chunk);
    if (got <= 0) {
      int code = Z_OK;
      const char* message = gzerror(gz_.get(), &code);
      if (got < 0 || code != Z_OK) error_ = message != nullptr ? message : "gzip error";
      break;
    }
    done += static_cast<size_t>(got);
  }
  return done;
}

StatusOr<bool> TfRecordReader::Next(std::string* record) {
  while (!done_) {
    const int64_t start = offset_;
    // Built on failure only: a record read every epoch allocates nothing.
    auto where = [&] { return path_ + ": record at offset " + std::to_string(start); };
    // Gives up on the rest of the file (skip_corrupt) or fails.
    auto give_up = [&](const std::string& what) -> StatusOr<bool> {
      done_ = true;
      if (!options_.skip_corrupt) return DataLoss(where() + ": " + what);
      ++corrupt_skipped_;
      spdlog::warn("event=tfrecord_corrupt file={} offset={} problem=\"{}\" action=skip_rest_of_file", path_,
                   start, what);
      return false;
    };
    char header[12];
    const size_t got = Read(header, sizeof header);
    if (!error_.empty()) return give_up("the compressed stream is damaged (" + error_ + ")");
    if (got == 0 && (in_ == nullptr || in_->eof())) {
      done_ = true;
      return false;
    }
    if (got < sizeof header) return give_up("the file ends inside a record header");
    const uint64_t length = GetLittleEndian(header, 8);
    if (MaskCrc32c(Crc32c(std::string_view(header, 8))) !=
        static_cast<uint32_t>(GetLittleEndian(header + 8, 4))) {
      return give_up("the length's CRC does not match (a damaged header)");
    }
    if (length > kMaxRecordBytes) return give_up("a length of " + std::to_string(length) + " bytes");
    record->resize(length);
    char footer[4];
    if (Read(record->data(), length) < length || Read(footer, 4) < 4) {
      if (!error_.empty()) return give_up("the compressed stream is damaged (" + error_ + ")");
      return give_up("the file ends inside the record (" + std::to_string(length) + " bytes announced)");
    }
    offset_ = start + 16 + static_cast<int64_t>(length);
    if (MaskCrc32c(Crc32c(*record)) != static_cast<uint32_t>(GetLittleEndian(footer, 4))) {
      if (!options_.skip_corrupt) return DataLoss(where() + ": the data's CRC does not match");
      ++corrupt_skipped_;
      spdlog::warn(
          "event=tfrecord_corrupt file={} offset={} problem=\"data CRC mismatch\" action=skip_record", path_,
          start);
      continue;
    }
    ++records_read_;
    last_offset_ = start;
    return true;
  }
  return false;
}

StatusOr<TfRecordWriter> TfRecordWriter::Create(const std::string& path) {
  auto out = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
  if (!*out) return NotFound("cannot create '" + path + "': " + std::strerror(errno));
  return TfRecordWriter(path, std::move(out));
}

Status TfRecordWriter::Write(std::string_view record) {
  const std::string framed = FrameTfRecord(record);
  out_->write(framed.data(), static_cast<std::streamsize>(framed.size()));
  if (!*out_) return DataLoss("cannot write to '" + path_ + "': " + std::strerror(errno));
  return Status::Ok();
}

Status TfRecordWriter::Flush() {
  out_->flush();
  if (!*out_) return DataLoss("cannot write to '" + path_ + "': " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace lockstep
