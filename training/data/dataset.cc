#include "training/data/dataset.h"

#include <algorithm>
#include <string>

#include "training/data/csv_reader.h"
#include "training/data/example_reader.h"
#include "training/data/split.h"

namespace lockstep::training {
namespace {

StatusOr<LabelledTable> ReadTable(const DataConfig& data, const std::vector<std::string>& files) {
  if (data.format == "tfrecord") {
    ExampleOptions options;
    options.label_key = data.label;
    options.feature_keys = data.features;
    options.records.skip_corrupt = data.skip_corrupt_records;
    return ReadExamples(files, options);
  }
  CsvOptions options;
  options.label_column = data.label;
  options.feature_columns = data.features;
  LabelledTable all;
  for (const std::string& file : files) {
    LS_ASSIGN_OR_RETURN(LabelledTable t, ReadCsv(file, options));
    if (file == files.front()) {
      all = std::move(t);
      continue;
    }
    if (t.feature_names != all.feature_names) {
      return InvalidArgument(file + ": its feature columns differ from " + files.front() + "'s");
    }
    // Class names get ids across all the files, not per file.
    LabelledTable classes;
    classes.class_names = all.class_names;
    classes.class_names.insert(classes.class_names.end(), t.class_names.begin(), t.class_names.end());
    std::sort(classes.class_names.begin(), classes.class_names.end());
    classes.class_names.erase(std::unique(classes.class_names.begin(), classes.class_names.end()),
                              classes.class_names.end());
    LS_RETURN_IF_ERROR(MapClassesOnto(classes, all).WithPrefix(files.front()));
    LS_RETURN_IF_ERROR(MapClassesOnto(classes, t).WithPrefix(file));
    all.Append(t);
  }
  return all;
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

StatusOr<Dataset> LoadDataset(const DataConfig& data) {
  Dataset d;
  auto read = [&](const std::vector<std::string>& files) -> StatusOr<std::unique_ptr<LabelledTable>> {
    LS_ASSIGN_OR_RETURN(LabelledTable t, ReadTable(data, files));
    return std::make_unique<LabelledTable>(std::move(t));
  };
  LS_ASSIGN_OR_RETURN(d.tables[0], read(data.train));
  const LabelledTable& train_table = *d.tables[0];
  const std::array<const std::vector<std::string>*, 3> files = {&data.train, &data.validation, &data.test};
  const std::array<const char*, 3> fields = {"data.train", "data.validation", "data.test"};
  for (size_t i = 1; i < 3; ++i) {
    if (files[i]->empty()) continue;
    LS_ASSIGN_OR_RETURN(d.tables[i], read(*files[i]));
    if (d.tables[i]->feature_names != train_table.feature_names) {
      return InvalidArgument(std::string(fields[i]) + ": the files must have the training data's features");
    }
    LS_RETURN_IF_ERROR(MapClassesOnto(train_table, *d.tables[i]).WithPrefix(fields[i]));
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
