#include "training/data/row_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "training/data/csv_reader.h"

namespace lockstep::training {
namespace {

// A numeric feature's value count, or -1 when it is not numeric.
int64_t ValueCount(const tensorflow::Feature& feature) {
  if (feature.has_float_list()) return feature.float_list().value_size();
  if (feature.has_int64_list()) return feature.int64_list().value_size();
  return -1;
}

void CopyValues(const tensorflow::Feature& feature, float* out) {
  if (feature.has_float_list()) {
    std::copy(feature.float_list().value().begin(), feature.float_list().value().end(), out);
  } else {
    for (int64_t v : feature.int64_list().value()) *out++ = static_cast<float>(v);
  }
}

}  // namespace

StatusOr<RowFormat> DiscoverRowFormat(const std::string& format_name, const std::string& label,
                                      const std::vector<std::string>& features_wanted, const RecordStream& file,
                                      std::string_view first_record) {
  RowFormat format;
  format.format = format_name;
  format.label = label;
  auto add = [&](const std::string& key, int64_t width) {
    format.feature_keys.push_back({key, width});
    if (width == 1) {
      format.feature_names.push_back(key);
      return;
    }
    for (int64_t i = 0; i < width; ++i) format.feature_names.push_back(key + "[" + std::to_string(i) + "]");
  };
  if (format_name == "tfrecord") {
    if (features_wanted.empty()) return InvalidArgument("no feature keys given for the tf.train.Example records");
    tensorflow::Example example;
    if (!example.ParseFromArray(first_record.data(), static_cast<int>(first_record.size())))
      return DataLoss(file.Where() + ": not a tf.train.Example");
    const auto& features = example.features().feature();
    for (const std::string& key : features_wanted) {
      auto it = features.find(key);
      if (it == features.end()) return InvalidArgument(file.Where() + ": no feature '" + key + "'");
      const int64_t count = ValueCount(it->second);
      if (count < 0)
        return InvalidArgument(file.Where() + ": feature '" + key + "' is not a float or int64 list");
      if (count == 0) return InvalidArgument(file.Where() + ": feature '" + key + "' has no values");
      add(key, count);
    }
    return format;
  }
  const std::vector<std::string>& header = file.header();
  const std::string at = file.path() + ":1";
  if (std::find(header.begin(), header.end(), label) == header.end()) {
    return InvalidArgument(at + ": no label column '" + label + "' (the header names " +
                           std::to_string(header.size()) + " columns, first '" + header.front() + "', last '" +
                           header.back() + "')");
  }
  for (const std::string& name : features_wanted.empty() ? header : features_wanted) {
    if (name == label) continue;
    if (std::find(header.begin(), header.end(), name) == header.end())
      return InvalidArgument(at + ": no feature column '" + name + "'");
    add(name, 1);
  }
  if (format.feature_keys.empty()) return InvalidArgument(at + ": no feature columns besides the label");
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
  LS_ASSIGN_OR_RETURN(label_column_, find(format_.label, "label"));
  columns_.clear();
  for (const FeatureKey& key : format_.feature_keys) {
    LS_ASSIGN_OR_RETURN(size_t c, find(key.name, "feature"));
    columns_.push_back(c);
  }
  header_size_ = header.size();
  return Status::Ok();
}

Status RowDecoder::Decode(std::string_view record, const RecordStream& file, std::span<float> row,
                          RawLabel& label) {
  if (file.csv()) {
    LS_RETURN_IF_ERROR(SplitCsvFields(record, file.Where(), fields_));
    if (fields_.size() != header_size_) {
      return InvalidArgument(file.Where() + ": " + std::to_string(fields_.size()) +
                             " fields, but the header has " + std::to_string(header_size_));
    }
    for (size_t f = 0; f < columns_.size(); ++f) {
      const std::string& field = fields_[columns_[f]];
      if (!ParseCsvNumber(field, row[f])) {
        return InvalidArgument(file.Where() + ": column '" + format_.feature_keys[f].name +
                               "': " + QuotedForMessage(field) + " is not a finite number");
      }
    }
    const std::string& text = fields_[label_column_];
    label.is_name = !format_.class_names.empty() || !ParseCsvInteger(text, label.id);
    label.name = text;
    return Status::Ok();
  }
  if (!example_.ParseFromArray(record.data(), static_cast<int>(record.size())))
    return DataLoss(file.Where() + ": not a tf.train.Example");
  const auto& features = example_.features().feature();
  float* out = row.data();
  for (const FeatureKey& key : format_.feature_keys) {
    auto it = features.find(key.name);
    if (it == features.end()) return InvalidArgument(file.Where() + ": no feature '" + key.name + "'");
    const int64_t count = ValueCount(it->second);
    if (count < 0)
      return InvalidArgument(file.Where() + ": feature '" + key.name + "' is not a float or int64 list");
    if (count != key.width) {
      return InvalidArgument(file.Where() + ": feature '" + key.name + "' has " + std::to_string(count) +
                             " values, the first example had " + std::to_string(key.width));
    }
    CopyValues(it->second, out);
    out += count;
  }
  auto it = features.find(format_.label);
  if (it == features.end()) return InvalidArgument(file.Where() + ": no label feature '" + format_.label + "'");
  const tensorflow::Feature& l = it->second;
  label.is_name = l.has_bytes_list();
  const int size = label.is_name ? l.bytes_list().value_size() : l.has_int64_list() ? l.int64_list().value_size() : -1;
  if (size < 0)
    return InvalidArgument(file.Where() + ": label '" + format_.label + "' is not an int64 or bytes list");
  if (size != 1) {
    return InvalidArgument(file.Where() + ": label '" + format_.label + "' has " + std::to_string(size) +
                           " values, not 1");
  }
  if (label.is_name) {
    label.name = l.bytes_list().value(0);
  } else {
    label.id = l.int64_list().value(0);
  }
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
                             ") for the embedding layer model.layers[0]");
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::training
