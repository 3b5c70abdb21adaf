#include "training/data/data_scan.h"

#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "runtime/crc32c.h"
#include "training/data/csv_reader.h"
#include "training/data/record_stream.h"

namespace lockstep::training {

int64_t DataScan::total_records() const {
  return std::accumulate(records.begin(), records.end(), int64_t{0});
}

TfRecordReader::Options RecordOptions(const DataConfig& data) {
  TfRecordReader::Options options;
  options.skip_corrupt = data.skip_corrupt_records;
  options.compression = data.compression == "gzip"   ? TfRecordReader::Options::Compression::kGzip
                        : data.compression == "none" ? TfRecordReader::Options::Compression::kNone
                                                     : TfRecordReader::Options::Compression::kAuto;
  return options;
}

StatusOr<DataScan> ScanTrainingFiles(const DataConfig& data, const std::vector<std::string>& files) {
  DataScan scan;
  scan.files = files;
  std::optional<RowDecoder> decoder;
  std::optional<FeatureStatsAccumulator> stats;
  std::vector<float> row, targets;
  std::set<std::string, std::less<>> names;  // labels read as text: class names (or CSV ids)
  bool named = false, csv_ids = true, first_label = true;
  std::string bad_csv_id;  // the first integer label out of range, named, in case they are ids
  const int64_t sample = data.stats_sample > 0 ? data.stats_sample : INT64_MAX;
  std::string_view record;
  for (const std::string& path : files) {
    LS_ASSIGN_OR_RETURN(RecordStream stream, RecordStream::Open(path, data.format, RecordOptions(data)));
    int64_t count = 0;
    while (true) {
      LS_ASSIGN_OR_RETURN(bool more, stream.Next(&record));
      if (!more) break;
      ++count;
      scan.bytes += static_cast<int64_t>(record.size());
      scan.fingerprint = Crc32c(record, scan.fingerprint);
      if (!decoder) {
        LS_ASSIGN_OR_RETURN(scan.format, DiscoverRowFormat(data.format, data.label, data.targets, data.features, stream, record));
        decoder.emplace(scan.format);
        stats.emplace(scan.format.num_features());
        row.resize(static_cast<size_t>(scan.format.num_features()));
        targets.resize(static_cast<size_t>(scan.format.num_targets()));
      }
      if (count == 1) LS_RETURN_IF_ERROR(decoder->StartFile(stream));
      // Every record's label (so that every class is known, and a bad label is named now, not
      // mid-epoch); the features of the sample's records only.
      RawLabel label;
      const bool sampled = scan.stats_rows < sample;
      if (sampled) {
        LS_RETURN_IF_ERROR(decoder->Decode(record, stream, row, label, targets));
        stats->Add(row);
        ++scan.stats_rows;
      } else {
        LS_RETURN_IF_ERROR(decoder->DecodeLabel(record, stream, label));
      }
      if (scan.format.regression()) continue;  // the targets were checked; there are no classes
      if (std::exchange(first_label, false)) named = label.is_name;
      if (stream.csv()) {
        int64_t id = 0;
        const bool integer = !label.is_name && ParseCsvInteger(label.name, id);
        csv_ids = csv_ids && integer;
        if (integer && (id < 0 || id > std::numeric_limits<int32_t>::max()) && bad_csv_id.empty()) {
          bad_csv_id = stream.Where() + ": label " + std::string(label.name) +
                       " is out of range (class ids are 0 to 2147483647)";
        }
        if (label.name.empty()) return InvalidArgument(stream.Where() + ": column '" + data.label + "': the label is empty");
        if (names.find(label.name) == names.end()) names.emplace(label.name);
      } else if (label.is_name != named) {
        return InvalidArgument(stream.Where() + ": label '" + data.label + "' is " +
                               (label.is_name ? "a name" : "an id") + ", earlier records had " +
                               (named ? "names" : "ids"));
      } else if (named) {
        if (names.find(label.name) == names.end()) names.emplace(label.name);
      } else {
        int32_t id = 0;
        LS_RETURN_IF_ERROR(decoder->Resolve(label, stream, id));  // the id's range
      }
    }
    if (count == 0 && stream.corrupt_skipped() == 0) {
      return InvalidArgument(path + ": no records" + (stream.csv() ? " after the header" : ""));
    }
    scan.records.push_back(count);
  }
  if (scan.stats_rows == 0) return InvalidArgument("no records in the training files");
  if (data.format == "csv" && csv_ids && !bad_csv_id.empty() && !scan.format.regression()) {
    return InvalidArgument(bad_csv_id);
  }
  const bool names_are_classes = !scan.format.regression() && (data.format == "csv" ? !csv_ids : named);
  if (names_are_classes) scan.format.class_names.assign(names.begin(), names.end());
  scan.stats = stats->Finish();
  return scan;
}

}  // namespace lockstep::training
