#include "training/data/prediction_log_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "runtime/example_wire.h"
#include "runtime/saved_model/tensor_proto.h"
#include "training/data/csv_reader.h"

namespace lockstep::training {
namespace {

// The fields read, by number (tensorflow_serving/apis/*.proto; request_id and truncated are
// model-server's own LogMetadata fields, numbered past upstream's).
namespace field {
constexpr int kLogMetadata = 1, kClassifyLog = 2, kRegressLog = 3, kMultiInferenceLog = 4, kPredictLog = 6;
constexpr int kRequestId = 1001, kTruncated = 1002;  // LogMetadata
constexpr int kRequest = 1;                          // every *Log
constexpr int kPredictInputs = 2;                    // PredictRequest: map<string, TensorProto>
constexpr int kMapKey = 1, kMapValue = 2;
constexpr int kInput = 2;  // ClassificationRequest, RegressionRequest, MultiInferenceRequest
constexpr int kExampleList = 1, kExampleListWithContext = 2;  // Input
constexpr int kExamples = 1, kContext = 2;                    // ExampleList(WithContext)
}  // namespace field

constexpr int kVarint = 0, kFixed64 = 1, kDelimited = 2, kFixed32 = 5;

// One field of a message's wire format: its number, and its value (a varint, or the bytes of a
// length-delimited field, a view into the message).
struct WireField {
  int number = 0;
  int type = 0;
  uint64_t varint = 0;
  std::string_view bytes;
};

bool ReadVarint(std::string_view& in, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    out |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// The next field of `in` into `f`, consuming it: false at the end; DataLoss when not wire format.
StatusOr<bool> NextField(std::string_view& in, WireField& f) {
  if (in.empty()) return false;
  uint64_t tag = 0;
  if (!ReadVarint(in, tag) || (tag >> 3) == 0 || (tag >> 3) > (uint64_t{1} << 29)) {
    return DataLoss("not a PredictionLog (a bad field tag)");
  }
  f.number = static_cast<int>(tag >> 3);
  f.type = static_cast<int>(tag & 7);
  f.bytes = {};
  switch (f.type) {
    case kVarint:
      if (!ReadVarint(in, f.varint)) return DataLoss("not a PredictionLog (a cut varint)");
      return true;
    case kFixed64:
    case kFixed32: {
      const size_t n = f.type == kFixed64 ? 8 : 4;
      if (in.size() < n) return DataLoss("not a PredictionLog (a cut fixed field)");
      in.remove_prefix(n);
      return true;
    }
    case kDelimited: {
      uint64_t length = 0;
      if (!ReadVarint(in, length) || length > in.size()) return DataLoss("not a PredictionLog (a length past the end)");
      f.bytes = in.substr(0, length);
      in.remove_prefix(length);
      return true;
    }
    default: return DataLoss("not a PredictionLog (wire type " + std::to_string(f.type) + ")");
  }
}

// The length-delimited fields numbered `number` of `message`, in order.
StatusOr<std::vector<std::string_view>> Fields(std::string_view message, int number) {
  std::vector<std::string_view> out;
  WireField f;
  for (;;) {
    LS_ASSIGN_OR_RETURN(const bool more, NextField(message, f));
    if (!more) return out;
    if (f.number == number && f.type == kDelimited) out.push_back(f.bytes);
  }
}

// The last length-delimited field `number` (protobuf's rule for a singular field), or empty.
StatusOr<std::string_view> LastField(std::string_view message, int number) {
  LS_ASSIGN_OR_RETURN(const std::vector<std::string_view> all, Fields(message, number));
  return all.empty() ? std::string_view() : all.back();
}

struct Label {
  std::string value;          // classification: the label field as written
  std::vector<float> targets;  // regression
  int64_t line = 0;
  bool used = false;
};
using LabelKey = std::pair<std::string, int64_t>;  // request id, instance
using Labels = std::map<LabelKey, Label>;

StatusOr<Labels> ReadLabels(const PredictionLogOptions& options) {
  const std::string& path = options.labels_path;
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("data.labels '" + path + "': cannot be read");
  Labels labels;
  std::vector<std::string> fields;
  std::string line;
  int64_t number = 0;
  int64_t id_column = -1, row_column = -1, label_column = -1;
  std::vector<int64_t> target_columns;
  size_t width = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(number);
    LS_RETURN_IF_ERROR(SplitCsvFields(line, where, fields));
    if (width == 0) {
      width = fields.size();
      auto column = [&](const std::string& name) {
        for (size_t i = 0; i < fields.size(); ++i) {
          if (fields[i] == name) return static_cast<int64_t>(i);
        }
        return int64_t{-1};
      };
      id_column = column("request_id");
      row_column = column("row");
      if (id_column < 0) return InvalidArgument(where + ": no 'request_id' column");
      if (options.targets.empty()) {
        label_column = column(options.label);
        if (label_column < 0) return InvalidArgument(where + ": no '" + options.label + "' column (data.label)");
      }
      for (const std::string& t : options.targets) {
        target_columns.push_back(column(t));
        if (target_columns.back() < 0) return InvalidArgument(where + ": no '" + t + "' column (data.targets)");
      }
      continue;
    }
    if (fields.size() != width) {
      return InvalidArgument(fmt::format("{}: {} fields, the header has {}", where, fields.size(), width));
    }
    int64_t row = 0;
    if (row_column >= 0 && (!ParseCsvInteger(fields[static_cast<size_t>(row_column)], row) || row < 0)) {
      return InvalidArgument(where + ": column 'row': " + QuotedForMessage(fields[static_cast<size_t>(row_column)]) +
                             " is not an instance index (0, 1, ...)");
    }
    Label label;
    label.line = number;
    if (label_column >= 0) {
      label.value = fields[static_cast<size_t>(label_column)];
      if (label.value.empty()) return InvalidArgument(where + ": column '" + options.label + "' is empty");
    }
    for (size_t t = 0; t < target_columns.size(); ++t) {
      float value = 0;
      const std::string& text = fields[static_cast<size_t>(target_columns[t])];
      if (!ParseCsvNumber(text, value)) {
        return InvalidArgument(where + ": column '" + options.targets[t] + "': " + QuotedForMessage(text) +
                               " is not a number");
      }
      label.targets.push_back(value);
    }
    const std::string& id = fields[static_cast<size_t>(id_column)];
    if (id.empty()) return InvalidArgument(where + ": an empty request_id");
    auto [it, inserted] = labels.emplace(LabelKey{id, row}, std::move(label));
    if (!inserted) {
      return InvalidArgument(fmt::format("{}: request {} row {} is labelled already, on line {}", where, id, row,
                                         it->second.line));
    }
  }
  if (width == 0) return InvalidArgument("data.labels '" + path + "': empty (it needs a header)");
  return labels;
}

// As a CSV's features must be (csv_reader.h): one NaN would spread through every weight.
Status CheckFinite(std::span<const float> values, const std::string& what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return InvalidArgument(fmt::format("{}: value {} is not finite", what, i));
  }
  return Status::Ok();
}

// The rows a record's request holds, each num_features floats, appended to `rows`; returns how
// many. `what` prefixes errors (the file and record).
class RowsOfRequest {
 public:
  explicit RowsOfRequest(const PredictionLogOptions& options) : options_(options) {
    for (const FeatureKey& k : options.feature_keys) width_ += k.width;
    if (width_ == 0) width_ = static_cast<int64_t>(options.feature_names.size());
  }
  int64_t width() const { return width_; }
  const std::string& input_name() const { return input_name_; }

  StatusOr<int64_t> FromPredict(std::string_view request, std::vector<float>& rows) {
    LS_ASSIGN_OR_RETURN(const std::vector<std::string_view> entries, Fields(request, field::kPredictInputs));
    std::string_view chosen;
    std::string chosen_name;
    for (std::string_view entry : entries) {
      LS_ASSIGN_OR_RETURN(const std::string_view key, LastField(entry, field::kMapKey));
      LS_ASSIGN_OR_RETURN(const std::string_view value, LastField(entry, field::kMapValue));
      if (options_.input.empty() ? entries.size() == 1 : key == options_.input) {
        chosen = value;
        chosen_name = std::string(key);
      }
    }
    if (chosen_name.empty()) {
      return InvalidArgument(options_.input.empty()
                                 ? fmt::format("the request has {} inputs: data.input must name one", entries.size())
                                 : "the request has no input '" + options_.input + "' (data.input)");
    }
    tensorflow::TensorProto proto;
    if (!proto.ParseFromArray(chosen.data(), static_cast<int>(chosen.size()))) {
      return DataLoss("input '" + chosen_name + "' is not a TensorProto");
    }
    StatusOr<Tensor> decoded = TensorFromProto(proto);
    if (!decoded.ok()) return decoded.status().WithPrefix("input '" + chosen_name + "'");
    const Tensor& tensor = *decoded;
    const Shape& shape = tensor.shape();
    if (shape.rank() < 1) return InvalidArgument("input '" + chosen_name + "' is a scalar: dimension 0 is the batch");
    const int64_t batch = shape.dim(0);
    const int64_t width = batch == 0 ? 0 : tensor.num_elements() / batch;
    if (input_name_.empty() && batch > 0) {
      input_name_ = chosen_name;
      if (width_ == 0) width_ = width;
    }
    if (batch > 0 && width != width_) {
      return InvalidArgument(fmt::format("input '{}' has {} values a row, the features are {}", chosen_name, width,
                                         width_));
    }
    const size_t start = rows.size();
    rows.resize(start + static_cast<size_t>(tensor.num_elements()));
    float* out = rows.data() + start;
    auto copy = [&](auto values) {
      for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
    };
    switch (tensor.dtype()) {
      case DType::kFloat32: copy(tensor.data<float>()); break;
      case DType::kFloat64: copy(tensor.data<double>()); break;
      case DType::kInt32: copy(tensor.data<int32_t>()); break;
      case DType::kInt64: copy(tensor.data<int64_t>()); break;
      case DType::kUInt8: copy(tensor.data<uint8_t>()); break;
      default:
        rows.resize(start);
        return InvalidArgument("input '" + chosen_name + "' is " + std::string(DTypeName(tensor.dtype())) +
                               ": only numbers train");
    }
    LS_RETURN_IF_ERROR(CheckFinite(std::span<const float>(out, static_cast<size_t>(tensor.num_elements())),
                                   "input '" + chosen_name + "'"));
    return batch;
  }

  // classify_log, regress_log, multi_inference_log: the request's Input.
  StatusOr<int64_t> FromExamples(std::string_view request, std::vector<float>& rows) {
    if (options_.feature_keys.empty()) {
      return InvalidArgument("a logged tf.Example's features need names: data.features, or data.original's");
    }
    LS_ASSIGN_OR_RETURN(const std::string_view input, LastField(request, field::kInput));
    LS_ASSIGN_OR_RETURN(std::string_view list, LastField(input, field::kExampleList));
    std::string_view context;
    if (list.empty()) {
      LS_ASSIGN_OR_RETURN(list, LastField(input, field::kExampleListWithContext));
      LS_ASSIGN_OR_RETURN(context, LastField(list, field::kContext));
    }
    LS_ASSIGN_OR_RETURN(const std::vector<std::string_view> examples, Fields(list, field::kExamples));
    for (size_t e = 0; e < examples.size(); ++e) {
      // An example's features override its context's: the two serializations, concatenated.
      std::string_view example = examples[e];
      if (!context.empty()) {
        merged_.assign(context);
        merged_.append(example);
        example = merged_;
      }
      const size_t start = rows.size();
      rows.resize(start + static_cast<size_t>(width_));
      std::span<float> out(rows.data() + start, static_cast<size_t>(width_));
      for (const FeatureKey& key : options_.feature_keys) {
        const std::string where = fmt::format("example {}: feature '{}'", e, key.name);
        StatusOr<ExampleFeature> feature = FindExampleFeature(example, key.name);
        if (!feature.ok()) return feature.status().WithPrefix(where);
        if (feature->kind == ExampleFeature::Kind::kAbsent) return InvalidArgument(where + ": absent");
        StatusOr<int64_t> read = ReadExampleNumbersAsFloats(*feature, out.first(static_cast<size_t>(key.width)));
        if (!read.ok()) return read.status().WithPrefix(where);
        const int64_t n = *read;
        if (n != key.width) return InvalidArgument(fmt::format("{}: {} values, not {}", where, n, key.width));
        LS_RETURN_IF_ERROR(CheckFinite(out.first(static_cast<size_t>(key.width)), where));
        out = out.subspan(static_cast<size_t>(key.width));
      }
    }
    return static_cast<int64_t>(examples.size());
  }

 private:
  const PredictionLogOptions& options_;
  int64_t width_ = 0;
  std::string input_name_;
  std::string merged_;
};

}  // namespace

StatusOr<PredictionLogRows> ReadPredictionLogs(std::span<const std::string> paths, const PredictionLogOptions& options) {
  LS_ASSIGN_OR_RETURN(Labels labels, ReadLabels(options));
  PredictionLogRows out;
  LabelledTable& table = out.table;
  RowsOfRequest requests(options);
  std::vector<float> rows;
  std::vector<std::string> names;  // classification: each kept row's label as written
  std::string record;
  for (const std::string& path : paths) {
    const int32_t file_index = static_cast<int32_t>(table.source_files.size());
    table.source_files.push_back(path);
    LS_ASSIGN_OR_RETURN(TfRecordReader reader, TfRecordReader::Open(path, options.records));
    for (;;) {
      LS_ASSIGN_OR_RETURN(const bool more, reader.Next(&record));
      if (!more) break;
      ++out.records;
      const std::string where = fmt::format("{}: record at offset {}", path, reader.last_offset());
      std::string_view rest = record, metadata, request;
      int log_type = 0;
      WireField f;
      for (;;) {
        StatusOr<bool> next = NextField(rest, f);
        if (!next.ok()) return next.status().WithPrefix(where);
        if (!*next) break;
        if (f.type != kDelimited) continue;
        if (f.number == field::kLogMetadata) metadata = f.bytes;
        if (f.number == field::kClassifyLog || f.number == field::kRegressLog ||
            f.number == field::kMultiInferenceLog || f.number == field::kPredictLog) {
          log_type = f.number;
          StatusOr<std::string_view> r = LastField(f.bytes, field::kRequest);
          if (!r.ok()) return r.status().WithPrefix(where);
          request = *r;
        }
      }
      std::string request_id;
      bool truncated = false;
      for (std::string_view m = metadata;;) {
        StatusOr<bool> next = NextField(m, f);
        if (!next.ok()) return next.status().WithPrefix(where);
        if (!*next) break;
        if (f.number == field::kRequestId && f.type == kDelimited) request_id = std::string(f.bytes);
        if (f.number == field::kTruncated && f.type == kVarint) truncated = f.varint != 0;
      }
      if (log_type == 0 || truncated) {
        ++out.passed_over;
        continue;
      }
      const size_t before = rows.size();
      StatusOr<int64_t> instances = log_type == field::kPredictLog ? requests.FromPredict(request, rows)
                                                                    : requests.FromExamples(request, rows);
      if (!instances.ok()) return instances.status().WithPrefix(where);
      out.instances += *instances;
      // Keep the labelled instances only, in order.
      size_t kept = before;
      const auto width = static_cast<size_t>(requests.width());
      for (int64_t i = 0; i < *instances; ++i) {
        auto label = labels.find(LabelKey{request_id, i});
        if (label == labels.end()) {
          ++out.unlabeled;
          continue;
        }
        if (label->second.used) {  // a retry logged under the same id: its row once
          ++out.duplicates;
          continue;
        }
        label->second.used = true;
        std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(before + static_cast<size_t>(i) * width), width,
                    rows.begin() + static_cast<std::ptrdiff_t>(kept));
        kept += width;
        names.push_back(label->second.value);
        table.targets.insert(table.targets.end(), label->second.targets.begin(), label->second.targets.end());
        table.origins.push_back({file_index, reader.last_offset()});
      }
      rows.resize(kept);
    }
  }
  for (const auto& [key, label] : labels) out.unmatched_labels += label.used ? 0 : 1;

  table.record_offsets = true;
  table.features = std::move(rows);
  if (!options.feature_names.empty()) {
    table.feature_names = options.feature_names;
    table.feature_keys = options.feature_keys;
  } else {
    const std::string& input = requests.input_name();
    for (int64_t i = 0; i < requests.width(); ++i) table.feature_names.push_back(fmt::format("{}[{}]", input, i));
    table.feature_keys = {FeatureKey{input, requests.width()}};
  }
  if (options.targets.empty()) {
    bool all_ids = true;
    std::vector<int64_t> ids(names.size());
    for (size_t i = 0; i < names.size() && all_ids; ++i) {
      all_ids = ParseCsvInteger(names[i], ids[i]) && ids[i] >= 0 && ids[i] <= std::numeric_limits<int32_t>::max();
    }
    if (all_ids) {
      for (int64_t id : ids) table.labels.push_back(static_cast<int32_t>(id));
    } else {
      AssignClassNames(names, table);
    }
  } else {
    table.labels.assign(table.origins.size(), 0);
    table.target_names = options.targets;
    for (const std::string& t : options.targets) table.target_keys.push_back({t, 1});
  }
  return out;
}

}  // namespace lockstep::training
