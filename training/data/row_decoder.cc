#include "training/data/row_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "runtime/example_wire.h"
#include "training/data/csv_reader.h"

namespace lockstep::training {
namespace {

// Feature `key` of the record `file` last returned, read where it lies (runtime/example_wire.h).
StatusOr<ExampleFeature> FindFeature(std::string_view record, const RecordStream& file, const std::string& key) {
  StatusOr<ExampleFeature> f = FindExampleFeature(record, key);
  if (!f.ok()) return DataLoss(file.Where() + ": not a tf.train.Example (" + f.status().message() + ")");
  return f;
}

// A numeric key's values into `out` (as many as fit); how many it holds. `what` is "feature"
// or "target", for messages.
StatusOr<int64_t> ReadNumbers(std::string_view record, const RecordStream& file, const std::string& key,
                              std::span<float> out, const char* what = "feature") {
  LS_ASSIGN_OR_RETURN(ExampleFeature f, FindFeature(record, file, key));
  if (f.kind == ExampleFeature::Kind::kAbsent) {
    return InvalidArgument(file.Where() + ": no " + what + " '" + key + "'");
  }
  if (f.kind == ExampleFeature::Kind::kBytes) {
    return InvalidArgument(file.Where() + ": " + what + " '" + key + "' is not a float or int64 list");
  }
  StatusOr<int64_t> count = ReadExampleNumbersAsFloats(f, out);
  if (!count.ok()) return DataLoss(file.Where() + ": " + what + " '" + key + "': " + count.status().message());
  return count;
}

// A tf.Example's float list may hold NaN or an infinity, which no loss can train towards.
Status CheckFiniteTargets(std::span<const float> targets, const RecordStream& file, const RowFormat& format) {
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!std::isfinite(targets[i])) {
      return InvalidArgument(file.Where() + ": target '" + format.target_names[i] + "' is " +
                             fmt::format("{}", targets[i]) + ", not a finite number");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<RowFormat> DiscoverRowFormat(const std::string& format_name, const std::string& label,
                                      const std::vector<std::string>& targets,
                                      const std::vector<std::string>& features_wanted, const RecordStream& file,
                                      std::string_view first_record) {
  RowFormat format;
  format.format = format_name;
  format.label = label;
  auto add = [](std::vector<FeatureKey>& keys, std::vector<std::string>& names, const std::string& key,
                int64_t width) {
    keys.push_back({key, width});
    if (width == 1) {
      names.push_back(key);
      return;
    }
    for (int64_t i = 0; i < width; ++i) names.push_back(key + "[" + std::to_string(i) + "]");
  };
  if (format_name == "tfrecord") {
    if (features_wanted.empty()) return InvalidArgument("no feature keys given for the tf.train.Example records");
    for (const std::string& key : features_wanted) {
      LS_ASSIGN_OR_RETURN(int64_t count, ReadNumbers(first_record, file, key, {}));
      if (count == 0) return InvalidArgument(file.Where() + ": feature '" + key + "' has no values");
      add(format.feature_keys, format.feature_names, key, count);
    }
    for (const std::string& key : targets) {
      LS_ASSIGN_OR_RETURN(int64_t count, ReadNumbers(first_record, file, key, {}, "target"));
      if (count == 0) return InvalidArgument(file.Where() + ": target '" + key + "' has no values");
      add(format.target_keys, format.target_names, key, count);
    }
    return format;
  }
  const std::vector<std::string>& header = file.header();
  const std::string at = file.path() + ":1";
  auto has = [&](const std::string& name) { return std::find(header.begin(), header.end(), name) != header.end(); };
  if (targets.empty() && !has(label)) {
    return InvalidArgument(at + ": no label column '" + label + "' (the header names " +
                           std::to_string(header.size()) + " columns, first '" + header.front() + "', last '" +
                           header.back() + "')");
  }
  for (const std::string& name : targets) {
    if (!has(name)) return InvalidArgument(at + ": no target column '" + name + "'");
    add(format.target_keys, format.target_names, name, 1);
  }
  const bool regression = !targets.empty();
  for (const std::string& name : features_wanted.empty() ? header : features_wanted) {
    if (regression ? std::find(targets.begin(), targets.end(), name) != targets.end() : name == label) continue;
    if (!has(name)) return InvalidArgument(at + ": no feature column '" + name + "'");
    add(format.feature_keys, format.feature_names, name, 1);
  }
  if (format.feature_keys.empty()) {
    return InvalidArgument(at + ": no feature columns besides the " + (regression ? "targets" : "label"));
  }
  return format;
}

Status RowDecoder::StartFile(const RecordStream& file) {
  if (!file.csv()) return Status::Ok();
  const std::vector<std::string>& header = file.header();
  const std::string at = file.path() + ":1";
  std::unordered_map<std::string_view, size_t> column_of;
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c].empty()) return InvalidArgument(at + ": column " + std::to_string(c + 1) + " has no name");
    if (!column_of.emplace(header[c], c).second)
      return InvalidArgument(at + ": column '" + header[c] + "' appears twice");
  }
  auto find = [&](const std::string& name, const char* what) -> StatusOr<size_t> {
    auto it = column_of.find(name);
    if (it == column_of.end()) return InvalidArgument(at + ": no " + what + " column '" + name + "'");
    return it->second;
  };
  if (!format_.regression()) {
    LS_ASSIGN_OR_RETURN(label_column_, find(format_.label, "label"));
  }
  columns_.clear();
  for (const FeatureKey& key : format_.feature_keys) {
    LS_ASSIGN_OR_RETURN(size_t c, find(key.name, "feature"));
    columns_.push_back(c);
  }
  target_columns_.clear();
  for (const FeatureKey& key : format_.target_keys) {
    LS_ASSIGN_OR_RETURN(size_t c, find(key.name, "target"));
    target_columns_.push_back(c);
  }
  header_size_ = header.size();
  return Status::Ok();
}

Status RowDecoder::SplitLine(std::string_view record, const RecordStream& file) {
  if (Status s = SplitCsvFields(record, "", fields_); !s.ok()) {
    return Status(s.code(), file.Where() + s.message());  // SplitCsvFields' messages start ": "
  }
  if (fields_.size() != header_size_) {
    return InvalidArgument(file.Where() + ": " + std::to_string(fields_.size()) + " fields, but the header has " +
                           std::to_string(header_size_));
  }
  return Status::Ok();
}

void RowDecoder::CsvLabel(RawLabel& label) const {
  const std::string& text = fields_[label_column_];
  label.is_name = !format_.class_names.empty() || !ParseCsvInteger(text, label.id);
  label.name = text;
}

Status RowDecoder::ExampleLabel(std::string_view record, const RecordStream& file, RawLabel& label) const {
  LS_ASSIGN_OR_RETURN(ExampleFeature l, FindFeature(record, file, format_.label));
  if (l.kind == ExampleFeature::Kind::kAbsent)
    return InvalidArgument(file.Where() + ": no label feature '" + format_.label + "'");
  if (l.kind == ExampleFeature::Kind::kFloat)
    return InvalidArgument(file.Where() + ": label '" + format_.label + "' is not an int64 or bytes list");
  label.is_name = l.kind == ExampleFeature::Kind::kBytes;
  auto damaged = [&](const Status& s) {
    return DataLoss(file.Where() + ": label '" + format_.label + "': " + s.message());
  };
  // Counted first (the int64 list read as floats), then read as the integer it is.
  StatusOr<int64_t> size = label.is_name ? ReadExampleBytesViews(l, std::span<std::string_view>(&label.name, 1))
                                         : ReadExampleNumbersAsFloats(l, {});
  if (!size.ok()) return damaged(size.status());
  if (*size != 1) {
    return InvalidArgument(file.Where() + ": label '" + format_.label + "' has " + std::to_string(*size) +
                           " values, not 1");
  }
  if (!label.is_name) {
    if (Status s = ReadExampleInt64s(l, std::span<int64_t>(&label.id, 1)); !s.ok()) return damaged(s);
  }
  return Status::Ok();
}

Status RowDecoder::CsvValues(const RecordStream& file, const std::vector<size_t>& columns,
                             const std::vector<FeatureKey>& keys, std::span<float> out) const {
  for (size_t f = 0; f < columns.size(); ++f) {
    const std::string& field = fields_[columns[f]];
    if (!ParseCsvNumber(field, out[f])) {
      return InvalidArgument(file.Where() + ": column '" + keys[f].name + "': " + QuotedForMessage(field) +
                             " is not a finite number");
    }
  }
  return Status::Ok();
}

Status RowDecoder::ExampleValues(std::string_view record, const RecordStream& file,
                                 const std::vector<FeatureKey>& keys, const char* what,
                                 std::span<float> values) const {
  float* out = values.data();
  for (const FeatureKey& key : keys) {
    LS_ASSIGN_OR_RETURN(int64_t count, ReadNumbers(record, file, key.name,
                                                   std::span<float>(out, static_cast<size_t>(key.width)), what));
    if (count != key.width) {
      return InvalidArgument(file.Where() + ": " + what + " '" + key.name + "' has " + std::to_string(count) +
                             " values, the first example had " + std::to_string(key.width));
    }
    out += count;
  }
  return Status::Ok();
}

Status RowDecoder::Decode(std::string_view record, const RecordStream& file, std::span<float> row,
                          RawLabel& label, std::span<float> targets) {
  const bool regression = format_.regression();
  if (targets.size() != static_cast<size_t>(format_.num_targets())) {
    return Internal("RowDecoder::Decode: room for " + std::to_string(targets.size()) + " targets, the rows have " +
                    std::to_string(format_.num_targets()));
  }
  if (regression) label = RawLabel{};
  if (file.csv()) {
    LS_RETURN_IF_ERROR(SplitLine(record, file));
    LS_RETURN_IF_ERROR(CsvValues(file, columns_, format_.feature_keys, row));
    if (regression) return CsvValues(file, target_columns_, format_.target_keys, targets);
    CsvLabel(label);
    return Status::Ok();
  }
  LS_RETURN_IF_ERROR(ExampleValues(record, file, format_.feature_keys, "feature", row));
  if (!regression) return ExampleLabel(record, file, label);
  LS_RETURN_IF_ERROR(ExampleValues(record, file, format_.target_keys, "target", targets));
  return CheckFiniteTargets(targets, file, format_);
}

Status RowDecoder::DecodeLabel(std::string_view record, const RecordStream& file, RawLabel& label) {
  if (format_.regression()) {
    label = RawLabel{};
    targets_.resize(static_cast<size_t>(format_.num_targets()));
    if (!file.csv()) {
      LS_RETURN_IF_ERROR(ExampleValues(record, file, format_.target_keys, "target", targets_));
      return CheckFiniteTargets(targets_, file, format_);
    }
    LS_RETURN_IF_ERROR(SplitLine(record, file));
    return CsvValues(file, target_columns_, format_.target_keys, targets_);
  }
  if (!file.csv()) return ExampleLabel(record, file, label);
  LS_RETURN_IF_ERROR(SplitLine(record, file));
  CsvLabel(label);
  return Status::Ok();
}

Status RowDecoder::Resolve(const RawLabel& label, const RecordStream& file, int32_t& id) const {
  const std::vector<std::string>& names = format_.class_names;
  if (names.empty() != !label.is_name) {
    return InvalidArgument(file.Where() + ": label '" + format_.label + "' is " +
                           (label.is_name ? "a name" : "an id") + ", earlier records had " +
                           (label.is_name ? "ids" : "names"));
  }
  if (label.is_name) {
    auto it = std::lower_bound(names.begin(), names.end(), label.name);
    if (it == names.end() || *it != label.name) {
      return InvalidArgument(file.Where() + ": label '" + format_.label + "': class " +
                             QuotedForMessage(label.name) + " is not one of the training data's " +
                             std::to_string(names.size()) + " classes");
    }
    id = static_cast<int32_t>(it - names.begin());
    return Status::Ok();
  }
  if (label.id < 0 || label.id > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(file.Where() + ": label " + std::to_string(label.id) +
                           " is out of range (class ids are 0 to 2147483647)");
  }
  id = static_cast<int32_t>(label.id);
  return Status::Ok();
}

Status CheckRow(const RowLimits& limits, std::span<const float> row, int32_t label,
                const std::vector<std::string>& feature_names, const std::string& label_name) {
  if (label >= limits.num_classes) {
    return InvalidArgument("label '" + label_name + "' is " + std::to_string(label) + ", but the model has " +
                           std::to_string(limits.num_classes) + " outputs (" + limits.last_layer +
                           "), one per class from 0");
  }
  if (limits.vocabulary <= 0) return Status::Ok();
  for (size_t c = 0; c < row.size(); ++c) {
    const float v = row[c];
    if (!(v >= 0 && v < static_cast<float>(limits.vocabulary) && v == std::floor(v))) {
      return InvalidArgument("feature '" + feature_names[c] + "' is " + fmt::format("{}", v) +
                             ", not an id in [0, " + std::to_string(limits.vocabulary) +
                             ") for the embedding layer " + limits.embedding_layer);
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::training
