// TfRecordExample (fuzz_targets.h): a dataset file model-train reads.
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/table_checks.h"
#include "training/data/example_reader.h"

namespace lockstep::fuzz {

void TfRecordExample(Bytes data) {
  if (data.empty()) return;
  const uint8_t mode = data[0];
  const std::string_view file(reinterpret_cast<const char*>(data.data()) + 1, data.size() - 1);
  const std::string path = (FuzzScratchDir() / "data.tfrecord").string();
  if (!WriteBytes(path, file)) return;

  training::ExampleOptions options;
  options.records.skip_corrupt = (mode & 1) != 0;
  options.feature_keys = (mode & 2) != 0 ? std::vector<std::string>{"x"} : std::vector<std::string>{"x", "y"};
  if ((mode & 4) != 0) options.label_key = "y";
  const std::string paths[] = {path};
  StatusOr<training::LabelledTable> table = training::ReadExamples(paths, options);
  if (table.ok()) CheckTable(*table);
}

}  // namespace lockstep::fuzz
