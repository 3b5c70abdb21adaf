#include "training/data/example_reader.h"

#include <optional>

#include "training/data/record_stream.h"
#include "training/data/row_decoder.h"

namespace lockstep::training {

StatusOr<LabelledTable> ReadExamples(std::span<const std::string> paths, const ExampleOptions& options) {
  if (options.feature_keys.empty())
    return InvalidArgument("no feature keys given for the tf.train.Example records");
  LabelledTable table;
  table.record_offsets = true;
  std::optional<RowFormat> format;
  std::optional<RowDecoder> decoder;
  std::vector<std::string> names;  // class names, when labels are bytes
  bool named_labels = false;
  std::string_view record;
  for (const std::string& path : paths) {
    const auto file = static_cast<int32_t>(table.source_files.size());
    table.source_files.push_back(path);
    LS_ASSIGN_OR_RETURN(RecordStream stream, RecordStream::Open(path, "tfrecord", options.records));
    while (true) {
      LS_ASSIGN_OR_RETURN(bool more, stream.Next(&record));
      if (!more) break;
      if (!format) {
        LS_ASSIGN_OR_RETURN(format,
                            DiscoverRowFormat("tfrecord", options.label_key, options.target_keys,
                                              options.feature_keys, stream, record));
        decoder.emplace(*format);
        table.feature_keys = format->feature_keys;
        table.feature_names = format->feature_names;
        table.target_keys = format->target_keys;
        table.target_names = format->target_names;
      }
      table.origins.push_back({file, stream.position()});
      const size_t at = table.features.size();
      table.features.resize(at + static_cast<size_t>(format->num_features()));
      const size_t target_at = table.targets.size();
      table.targets.resize(target_at + static_cast<size_t>(format->num_targets()));
      RawLabel label;
      LS_RETURN_IF_ERROR(decoder->Decode(record, stream, std::span<float>(table.features).subspan(at), label,
                                         std::span<float>(table.targets).subspan(target_at)));
      if (table.origins.size() == 1) named_labels = label.is_name;
      if (label.is_name != named_labels) {
        return InvalidArgument(stream.Where() + ": label '" + options.label_key + "' is " +
                               (label.is_name ? "a name" : "an id") + ", earlier records had " +
                               (named_labels ? "names" : "ids"));
      }
      if (named_labels) {
        names.emplace_back(label.name);
      } else {
        int32_t id = 0;
        LS_RETURN_IF_ERROR(decoder->Resolve(label, stream, id));
        table.labels.push_back(id);
      }
    }
  }
  if (named_labels) AssignClassNames(names, table);
  if (table.labels.empty()) return InvalidArgument("no records in the TFRecord files");
  return table;
}

}  // namespace lockstep::training
