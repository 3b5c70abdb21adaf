#include "training/data/record_stream.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "training/data/csv_reader.h"

namespace lockstep::training {

StatusOr<RecordStream> RecordStream::Open(const std::string& path, const std::string& format,
                                          TfRecordReader::Options records) {
  RecordStream s;
  s.path_ = path;
  if (format == "tfrecord") {
    LS_ASSIGN_OR_RETURN(TfRecordReader reader, TfRecordReader::Open(path, records));
    s.tfrecord_.emplace(std::move(reader));
    return s;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgument("'" + path + "' is a directory, not a CSV file");
  s.csv_ = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*s.csv_) return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  std::string_view header;
  LS_ASSIGN_OR_RETURN(bool any, s.Next(&header));
  if (!any) return InvalidArgument(path + ": the file is empty (no header row)");
  if (header.starts_with("\xEF\xBB\xBF")) header.remove_prefix(3);  // a UTF-8 byte order mark
  LS_RETURN_IF_ERROR(SplitCsvFields(header, s.Where(), s.header_));
  return s;
}

StatusOr<bool> RecordStream::Next(std::string_view* record) {
  if (tfrecord_) {
    LS_ASSIGN_OR_RETURN(bool more, tfrecord_->Next(&buffer_));
    *record = buffer_;
    return more;
  }
  while (std::getline(*csv_, buffer_)) {
    ++line_;
    std::string_view line = buffer_;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines
    *record = line;
    return true;
  }
  if (csv_->bad()) return DataLoss("cannot read '" + path_ + "': " + std::strerror(errno));
  return false;
}

std::string RecordStream::Where() const {
  if (tfrecord_) return path_ + ": record at offset " + std::to_string(tfrecord_->last_offset());
  return path_ + ":" + std::to_string(line_);
}

}  // namespace lockstep::training
