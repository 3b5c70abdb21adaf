// Csv (fuzz_targets.h): a dataset file model-train reads.
#include <string_view>

#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/table_checks.h"
#include "training/data/csv_reader.h"

namespace lockstep::fuzz {

void Csv(Bytes data) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  training::CsvOptions every_column;
  StatusOr<training::LabelledTable> table = training::ParseCsv(text, "data.csv", every_column);
  if (table.ok()) CheckTable(*table);

  training::CsvOptions chosen;
  chosen.label_column = "b";
  chosen.feature_columns = {"a", "c"};
  table = training::ParseCsv(text, "data.csv", chosen);
  if (table.ok()) {
    CheckTable(*table);
    LOCKSTEP_FUZZ_CHECK(table->num_features() == 2);
  }

  training::CsvOptions regression;  // targets "b" and "label", every other column a feature
  regression.target_columns = {"b", "label"};
  table = training::ParseCsv(text, "data.csv", regression);
  if (table.ok()) {
    CheckTable(*table);
    LOCKSTEP_FUZZ_CHECK(table->num_targets() == 2);
  }
}

}  // namespace lockstep::fuzz
