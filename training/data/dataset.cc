#include "training/data/dataset.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "runtime/crc32c.h"
#include "training/data/csv_reader.h"
#include "training/data/example_reader.h"
#include "training/data/file_patterns.h"
#include "training/data/prediction_log_reader.h"
#include "training/data/split.h"

namespace lockstep::training {
namespace {

// Appends `t` (read from `t_source`) to `all` (from `all_source`): the same features, and class
// names given ids across both, not per file.
Status MergeInto(LabelledTable& all, LabelledTable& t, const std::string& all_source, const std::string& t_source) {
  if (t.feature_names != all.feature_names) {
    return InvalidArgument(t_source + ": its features differ from " + all_source + "'s");
  }
  if (t.target_names != all.target_names) {
    return InvalidArgument(t_source + ": its targets differ from " + all_source + "'s");
  }
  LabelledTable classes;
  classes.class_names = all.class_names;
  classes.class_names.insert(classes.class_names.end(), t.class_names.begin(), t.class_names.end());
  std::sort(classes.class_names.begin(), classes.class_names.end());
  classes.class_names.erase(std::unique(classes.class_names.begin(), classes.class_names.end()),
                            classes.class_names.end());
  LS_RETURN_IF_ERROR(MapClassesOnto(classes, all).WithPrefix(all_source));
  LS_RETURN_IF_ERROR(MapClassesOnto(classes, t).WithPrefix(t_source));
  all.Append(t);
  return Status::Ok();
}

StatusOr<LabelledTable> ReadLoggedRows(const DataConfig& data, const std::vector<std::string>& files);

StatusOr<LabelledTable> ReadTable(const DataConfig& data, const std::vector<std::string>& files) {
  if (data.format == "prediction_log") return ReadLoggedRows(data, files);
  if (data.format == "tfrecord") {
    ExampleOptions options;
    options.label_key = data.label;
    options.target_keys = data.targets;
    options.feature_keys = data.features;
    options.records = RecordOptions(data);
    return ReadExamples(files, options);
  }
  CsvOptions options;
  options.label_column = data.label;
  options.target_columns = data.targets;
  options.feature_columns = data.features;
  LabelledTable all;
  for (const std::string& file : files) {
    LS_ASSIGN_OR_RETURN(LabelledTable t, ReadCsv(file, options));
    if (file == files.front()) {
      all = std::move(t);
      continue;
    }
    LS_RETURN_IF_ERROR(MergeInto(all, t, files.front(), file));
  }
  return all;
}

// data.format prediction_log: the original data's rows (data.original), then the logged rows
// that have labels, the original's features naming the logged columns.
StatusOr<LabelledTable> ReadLoggedRows(const DataConfig& data, const std::vector<std::string>& files) {
  PredictionLogOptions options;
  options.labels_path = data.labels;
  options.label = data.label;
  options.targets = data.targets;
  options.input = data.input;
  options.records = RecordOptions(data);
  LabelledTable all;
  if (!data.original.empty()) {
    DataConfig original = data;
    original.format = data.original_format;
    StatusOr<std::vector<std::string>> original_files = ExpandFilePatterns(data.original);
    if (!original_files.ok()) return original_files.status().WithPrefix("data.original.files");
    LS_ASSIGN_OR_RETURN(all, ReadTable(original, *original_files));
    options.feature_keys = all.feature_keys;
    options.feature_names = all.feature_names;
  } else {
    for (const std::string& name : data.features) options.feature_keys.push_back({name, 1});
    options.feature_names = data.features;
  }
  StatusOr<PredictionLogRows> logged = ReadPredictionLogs(files, options);
  if (!logged.ok()) return logged.status().WithPrefix("data.train");
  spdlog::info(
      "event=prediction_log_rows files={} records={} passed_over={} instances={} labelled={} unlabeled={} "
      "unmatched_labels={} original_rows={} duplicates={}",
      files.size(), logged->records, logged->passed_over, logged->instances, logged->table.num_rows(),
      logged->unlabeled, logged->unmatched_labels, all.num_rows(), logged->duplicates);
  if (logged->table.num_rows() == 0) {
    return InvalidArgument("data.labels '" + data.labels + "': no logged row has a label (" +
                           std::to_string(logged->instances) + " logged rows, " +
                           std::to_string(logged->unmatched_labels) + " labels for none of them)");
  }
  if (data.original.empty()) return std::move(logged->table);
  LS_RETURN_IF_ERROR(MergeInto(all, logged->table, "data.original", "data.train (the logs)"));
  return all;
}

// A held-out role's own files, checked for the training data's features and given its class
// ids (`classes` holds the training data's class names).
StatusOr<std::unique_ptr<LabelledTable>> ReadHeldOut(const DataConfig& data, const std::vector<std::string>& files,
                                                     const std::vector<std::string>& feature_names,
                                                     const std::vector<std::string>& target_names,
                                                     const LabelledTable& classes, const char* field) {
  LS_ASSIGN_OR_RETURN(LabelledTable t, ReadTable(data, files));
  if (t.feature_names != feature_names) {
    return InvalidArgument(std::string(field) + ": the files must have the training data's features");
  }
  if (t.target_names != target_names) {
    return InvalidArgument(std::string(field) + ": the files must have the training data's targets");
  }
  LS_RETURN_IF_ERROR(MapClassesOnto(classes, t).WithPrefix(field));
  return std::make_unique<LabelledTable>(std::move(t));
}

std::vector<int64_t> AllRows(const LabelledTable& t) {
  std::vector<int64_t> rows(static_cast<size_t>(t.num_rows()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  return rows;
}

std::vector<int64_t> Select(const std::vector<int64_t>& rows, const std::vector<int64_t>& positions) {
  std::vector<int64_t> out;
  for (int64_t p : positions) out.push_back(rows[static_cast<size_t>(p)]);
  return out;
}

std::vector<int32_t> LabelsOf(const LabelledTable& t, const std::vector<int64_t>& rows) {
  std::vector<int32_t> out;
  for (int64_t r : rows) out.push_back(t.labels[static_cast<size_t>(r)]);
  return out;
}

}  // namespace

const std::vector<FeatureKey>& Dataset::feature_keys() const {
  return scan ? scan->format.feature_keys : tables[0]->feature_keys;
}

const std::vector<std::string>& Dataset::class_names() const {
  return scan ? scan->format.class_names : tables[0]->class_names;
}

const std::vector<std::string>& Dataset::feature_names() const {
  return scan ? scan->format.feature_names : tables[0]->feature_names;
}

const std::vector<std::string>& Dataset::target_names() const {
  return scan ? scan->format.target_names : tables[0]->target_names;
}

const std::vector<FeatureKey>& Dataset::target_keys() const {
  return scan ? scan->format.target_keys : tables[0]->target_keys;
}

int64_t Dataset::train_rows() const {
  return scan ? scan->total_records() : static_cast<int64_t>(train.rows.size());
}

FeatureStats Dataset::TrainingStats() const {
  return scan ? scan->stats : ComputeFeatureStats(*train.table, train.rows);
}

std::string Dataset::Fingerprint() const {
  if (scan) return fmt::format("crc32c-records:{:08x}", scan->fingerprint);
  const LabelledTable& t = *tables[0];
  auto bytes = [](const auto& v) {
    return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  uint32_t labels = Crc32c(bytes(t.labels));
  if (!t.targets.empty()) labels = Crc32c(bytes(t.targets), labels);
  return fmt::format("crc32c:{:08x}", Crc32c(bytes(t.features), labels));
}

bool ChoosesStreaming(const DataConfig& data, const std::vector<std::string>& train_files) {
  if (data.mode != "auto") return data.mode == "streaming";
  uintmax_t bytes = 0;
  for (const std::string& file : train_files) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(file, ec);
    if (ec) return false;  // the reader names what is wrong with the file
    bytes += size;
  }
  if (bytes <= static_cast<uintmax_t>(data.streaming_threshold_mb) << 20) return false;
  const bool splits = (data.validation.empty() && data.validation_fraction > 0) ||
                      (data.test.empty() && data.test_fraction > 0);
  if (splits) {
    spdlog::warn(
        "event=data_mode mode=memory train_mb={} threshold_mb={} why=\"a split of the training files is asked "
        "for; give validation and test files to stream them\"",
        bytes >> 20, data.streaming_threshold_mb);
    return false;
  }
  return true;
}

StatusOr<Dataset> LoadDataset(const DataConfig& config) {
  DataConfig data = config;
  {
    const std::array<std::vector<std::string>*, 3> lists = {&data.train, &data.validation, &data.test};
    const std::array<const char*, 3> names = {"data.train", "data.validation", "data.test"};
    for (size_t i = 0; i < 3; ++i) {
      StatusOr<std::vector<std::string>> expanded = ExpandFilePatterns(*lists[i]);
      if (!expanded.ok()) return expanded.status().WithPrefix(names[i]);
      *lists[i] = std::move(expanded.value());
    }
  }
  const bool streaming = data.format != "prediction_log" && ChoosesStreaming(data, data.train);
  Dataset d;
  const std::array<const std::vector<std::string>*, 3> files = {&data.train, &data.validation, &data.test};
  const std::array<const char*, 3> fields = {"data.train", "data.validation", "data.test"};
  if (streaming) {
    LS_ASSIGN_OR_RETURN(d.scan, ScanTrainingFiles(data, data.train));
    LabelledTable classes;
    classes.class_names = d.scan->format.class_names;
    const std::array<Part*, 3> parts = {nullptr, &d.validation, &d.test};
    for (size_t i = 1; i < 3; ++i) {
      if (files[i]->empty()) continue;
      LS_ASSIGN_OR_RETURN(d.tables[i], ReadHeldOut(data, *files[i], d.scan->format.feature_names,
                                                   d.scan->format.target_names, classes, fields[i]));
      *parts[i] = {d.tables[i].get(), AllRows(*d.tables[i])};
    }
    return d;
  }
  {
    LS_ASSIGN_OR_RETURN(LabelledTable t, ReadTable(data, data.train));
    d.tables[0] = std::make_unique<LabelledTable>(std::move(t));
  }
  const LabelledTable& train_table = *d.tables[0];
  for (size_t i = 1; i < 3; ++i) {
    if (files[i]->empty()) continue;
    LS_ASSIGN_OR_RETURN(d.tables[i], ReadHeldOut(data, *files[i], train_table.feature_names,
                                                   train_table.target_names, train_table, fields[i]));
  }
  const LabelledTable* validation_table = d.tables[1].get();
  const LabelledTable* test_table = d.tables[2].get();
  Part& train = d.train;
  Part& validation = d.validation;
  Part& test = d.test;
  train = {&train_table, AllRows(train_table)};
  if (test_table != nullptr) {
    test = {test_table, AllRows(*test_table)};
  } else if (data.test_fraction > 0) {
    const RowSplit s = StratifiedSplit(train_table.labels, data.test_fraction, data.split_seed);
    test = {&train_table, s.held_out};
    train.rows = s.train;
  }
  if (validation_table != nullptr) {
    validation = {validation_table, AllRows(*validation_table)};
  } else if (data.validation_fraction > 0) {
    // A fraction of all the rows, taken from what the test left.
    const double remaining = test_table != nullptr ? 1.0 : 1.0 - data.test_fraction;
    const RowSplit s = StratifiedSplit(LabelsOf(train_table, train.rows),
                                       data.validation_fraction / remaining, data.split_seed + 1);
    validation = {&train_table, Select(train.rows, s.held_out)};
    train.rows = Select(train.rows, s.train);
  }
  if (train.rows.empty()) return InvalidArgument("data: no training rows are left after the split");
  return d;
}

}  // namespace lockstep::training
