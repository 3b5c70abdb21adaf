#include "training/data/csv_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

namespace lockstep::training {
namespace {

// Where a message points: "file:line".
std::string At(std::string_view source, int64_t line) {
  return std::string(source) + ":" + std::to_string(line);
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

// A quoted field must close on the same line (records do not span lines).
Status SplitCsvFields(std::string_view line, std::string_view where, std::vector<std::string>& fields) {
  fields.clear();
  size_t i = 0;
  while (true) {
    std::string field;
    // Spaces before an opening quote are allowed, as many writers put them after commas.
    size_t j = i;
    while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
    if (j < line.size() && line[j] == '"') {
      i = j + 1;
      while (true) {
        if (i >= line.size()) return InvalidArgument(std::string(where) + ": a quoted field is not closed");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != ',') {
        return InvalidArgument(std::string(where) + ": text after the closing quote of field " +
                               std::to_string(fields.size() + 1));
      }
    } else {
      const size_t comma = line.find(',', i);
      const size_t end = comma == std::string_view::npos ? line.size() : comma;
      field = std::string(TrimSpaces(line.substr(i, end - i)));
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) return Status::Ok();
    ++i;  // the comma
  }
}

bool ParseCsvNumber(std::string_view s, float& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

bool ParseCsvInteger(std::string_view s, int64_t& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string QuotedForMessage(std::string_view s) {
  constexpr size_t kMax = 40;
  if (s.size() > kMax) return "'" + std::string(s.substr(0, kMax)) + "...'";
  return "'" + std::string(s) + "'";
}

namespace {

// Labels read as text: integer ids when every one is an integer, else class names.
Status AssignLabels(const std::vector<std::string>& raw, const std::vector<int64_t>& lines,
                    std::string_view source, const std::string& column, LabelledTable& table) {
  table.labels.resize(raw.size());
  bool all_integers = true;
  for (size_t r = 0; r < raw.size() && all_integers; ++r) {
    int64_t id = 0;
    all_integers = ParseCsvInteger(raw[r], id);
  }
  if (all_integers) {
    for (size_t r = 0; r < raw.size(); ++r) {
      int64_t id = 0;
      (void)ParseCsvInteger(raw[r], id);
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
        return InvalidArgument(At(source, lines[r]) + ": column '" + column + "': label " + raw[r] +
                               " is out of range (class ids are 0 to 2147483647)");
      }
      table.labels[r] = static_cast<int32_t>(id);
    }
    return Status::Ok();
  }
  for (size_t r = 0; r < raw.size(); ++r) {
    if (raw[r].empty()) {
      return InvalidArgument(At(source, lines[r]) + ": column '" + column + "': the label is empty");
    }
  }
  AssignClassNames(raw, table);
  return Status::Ok();
}

}  // namespace

StatusOr<LabelledTable> ParseCsv(std::string_view text, std::string_view source, const CsvOptions& options) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark

  std::vector<std::string> header;
  std::vector<int> feature_index;  // column of each feature
  std::vector<int> target_index;   // regression: column of each target
  int label_index = -1;
  LabelledTable table;
  std::vector<std::string> raw_labels;
  std::vector<int64_t> label_lines;
  std::vector<std::string> fields;

  int64_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (TrimSpaces(line).empty()) continue;
    const std::string where = At(source, line_number);
    if (Status s = SplitCsvFields(line, where, fields); !s.ok()) return s;

    if (header.empty()) {
      header = fields;
      std::unordered_map<std::string, int> column_of;
      for (size_t c = 0; c < header.size(); ++c) {
        if (header[c].empty())
          return InvalidArgument(where + ": column " + std::to_string(c + 1) + " has no name");
        if (!column_of.emplace(header[c], static_cast<int>(c)).second) {
          return InvalidArgument(where + ": column '" + header[c] + "' appears twice");
        }
      }
      std::vector<int> excluded;  // the label, or the targets
      if (options.target_columns.empty()) {
        auto label = column_of.find(options.label_column);
        if (label == column_of.end()) {
          return InvalidArgument(where + ": no label column '" + options.label_column + "' (the header names " +
                                 std::to_string(header.size()) + " columns, first '" + header.front() +
                                 "', last '" + header.back() + "')");
        }
        label_index = label->second;
        excluded.push_back(label_index);
      }
      for (const std::string& name : options.target_columns) {
        auto it = column_of.find(name);
        if (it == column_of.end()) return InvalidArgument(where + ": no target column '" + name + "'");
        target_index.push_back(it->second);
        excluded.push_back(it->second);
        table.target_names.push_back(name);
        table.target_keys.push_back({name, 1});
      }
      auto is_excluded = [&](int c) { return std::find(excluded.begin(), excluded.end(), c) != excluded.end(); };
      if (options.feature_columns.empty()) {
        for (size_t c = 0; c < header.size(); ++c) {
          if (!is_excluded(static_cast<int>(c))) feature_index.push_back(static_cast<int>(c));
        }
      } else {
        for (const std::string& name : options.feature_columns) {
          auto it = column_of.find(name);
          if (it == column_of.end()) return InvalidArgument(where + ": no feature column '" + name + "'");
          if (is_excluded(it->second)) {
            return InvalidArgument(where + ": column '" + name + "' is the " +
                                   (label_index >= 0 ? "label" : "target") + ", not a feature");
          }
          feature_index.push_back(it->second);
        }
      }
      if (feature_index.empty()) {
        return InvalidArgument(where + ": no feature columns besides the " + (label_index >= 0 ? "label" : "targets"));
      }
      for (int c : feature_index) {
        table.feature_names.push_back(header[static_cast<size_t>(c)]);
        table.feature_keys.push_back({header[static_cast<size_t>(c)], 1});
      }
      continue;
    }

    if (fields.size() != header.size()) {
      return InvalidArgument(where + ": " + std::to_string(fields.size()) + " fields, but the header has " +
                             std::to_string(header.size()));
    }
    auto number = [&](int c, std::vector<float>& out) {
      const std::string& field = fields[static_cast<size_t>(c)];
      float value = 0;
      if (!ParseCsvNumber(field, value)) {
        return InvalidArgument(where + ": column '" + header[static_cast<size_t>(c)] + "': " + QuotedForMessage(field) +
                               " is not a finite number");
      }
      out.push_back(value);
      return Status::Ok();
    };
    for (int c : feature_index) LS_RETURN_IF_ERROR(number(c, table.features));
    for (int c : target_index) LS_RETURN_IF_ERROR(number(c, table.targets));
    if (label_index >= 0) raw_labels.push_back(std::move(fields[static_cast<size_t>(label_index)]));
    label_lines.push_back(line_number);
    table.origins.push_back({0, line_number});
  }
  if (header.empty()) return InvalidArgument(std::string(source) + ": the file is empty (no header row)");
  if (label_lines.empty()) return InvalidArgument(std::string(source) + ": no rows after the header");
  table.source_files = {std::string(source)};
  if (!target_index.empty()) {
    table.labels.assign(label_lines.size(), 0);
    return table;
  }
  if (Status s = AssignLabels(raw_labels, label_lines, source, options.label_column, table); !s.ok())
    return s;
  return table;
}

StatusOr<LabelledTable> ReadCsv(const std::string& path, const CsvOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgument("'" + path + "' is a directory, not a CSV file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLoss("cannot read '" + path + "': " + std::strerror(errno));
  return ParseCsv(text.str(), path, options);
}

}  // namespace lockstep::training
