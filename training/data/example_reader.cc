#include "training/data/example_reader.h"

#include <limits>

#include "tensorflow/core/example/example.pb.h"

namespace lockstep::training {
namespace {

// Appends a numeric feature's values as floats; returns how many, or -1 when the feature is
// not numeric.
int64_t AppendValues(const tensorflow::Feature& feature, std::vector<float>& out) {
  if (feature.has_float_list()) {
    out.insert(out.end(), feature.float_list().value().begin(), feature.float_list().value().end());
    return feature.float_list().value_size();
  }
  if (feature.has_int64_list()) {
    for (int64_t v : feature.int64_list().value()) out.push_back(static_cast<float>(v));
    return feature.int64_list().value_size();
  }
  return -1;
}

}  // namespace

StatusOr<LabelledTable> ReadExamples(std::span<const std::string> paths, const ExampleOptions& options) {
  if (options.feature_keys.empty())
    return InvalidArgument("no feature keys given for the tf.train.Example records");
  LabelledTable table;
  std::vector<int64_t> value_counts;  // per feature key, from the first example
  std::vector<std::string> names;     // class names, when labels are bytes
  bool named_labels = false;
  tensorflow::Example example;
  std::string record;
  table.record_offsets = true;
  for (const std::string& path : paths) {
    const auto file = static_cast<int32_t>(table.source_files.size());
    table.source_files.push_back(path);
    StatusOr<TfRecordReader> opened = TfRecordReader::Open(path, options.records);
    if (!opened.ok()) return opened.status();
    TfRecordReader& reader = opened.value();
    while (true) {
      StatusOr<bool> more = reader.Next(&record);
      if (!more.ok()) return more.status();
      if (!more.value()) break;
      const std::string where = path + ": record at offset " + std::to_string(reader.last_offset());
      table.origins.push_back({file, reader.last_offset()});
      if (!example.ParseFromString(record)) return DataLoss(where + ": not a tf.train.Example");
      const auto& features = example.features().feature();

      for (size_t f = 0; f < options.feature_keys.size(); ++f) {
        const std::string& key = options.feature_keys[f];
        auto it = features.find(key);
        if (it == features.end()) return InvalidArgument(where + ": no feature '" + key + "'");
        const int64_t count = AppendValues(it->second, table.features);
        if (count < 0) return InvalidArgument(where + ": feature '" + key + "' is not a float or int64 list");
        if (value_counts.size() < options.feature_keys.size()) {
          if (count == 0) return InvalidArgument(where + ": feature '" + key + "' has no values");
          value_counts.push_back(count);
          table.feature_keys.push_back({key, count});
          if (count == 1) {
            table.feature_names.push_back(key);
          } else {
            for (int64_t i = 0; i < count; ++i)
              table.feature_names.push_back(key + "[" + std::to_string(i) + "]");
          }
        } else if (count != value_counts[f]) {
          return InvalidArgument(where + ": feature '" + key + "' has " + std::to_string(count) +
                                 " values, the first example had " + std::to_string(value_counts[f]));
        }
      }

      auto label = features.find(options.label_key);
      if (label == features.end())
        return InvalidArgument(where + ": no label feature '" + options.label_key + "'");
      const tensorflow::Feature& l = label->second;
      const bool is_name = l.has_bytes_list();
      const int size = is_name              ? l.bytes_list().value_size()
                       : l.has_int64_list() ? l.int64_list().value_size()
                                            : -1;
      if (size < 0)
        return InvalidArgument(where + ": label '" + options.label_key + "' is not an int64 or bytes list");
      if (size != 1) {
        return InvalidArgument(where + ": label '" + options.label_key + "' has " + std::to_string(size) +
                               " values, not 1");
      }
      if (table.labels.empty() && names.empty()) named_labels = is_name;
      if (is_name != named_labels) {
        return InvalidArgument(where + ": label '" + options.label_key + "' is " +
                               (is_name ? "a name" : "an id") + ", earlier records had " +
                               (named_labels ? "names" : "ids"));
      }
      if (is_name) {
        names.push_back(l.bytes_list().value(0));
      } else {
        const int64_t id = l.int64_list().value(0);
        if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
          return InvalidArgument(where + ": label " + std::to_string(id) +
                                 " is out of range (class ids are 0 to 2147483647)");
        }
        table.labels.push_back(static_cast<int32_t>(id));
      }
    }
  }
  if (named_labels) AssignClassNames(names, table);
  if (table.labels.empty()) return InvalidArgument("no records in the TFRecord files");
  return table;
}

}  // namespace lockstep::training
