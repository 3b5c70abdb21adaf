// TfRecordExample (fuzz_targets.h): a dataset file model-train reads.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/table_checks.h"
#include "training/data/data_scan.h"
#include "training/data/example_reader.h"
#include "training/data/streaming_pipeline.h"

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
  if ((mode & 32) != 0) options.target_keys = {options.label_key};  // regression: the label key's values
  if ((mode & 8) == 0) {
    const std::string paths[] = {path};
    StatusOr<training::LabelledTable> table = training::ReadExamples(paths, options);
    if (table.ok()) CheckTable(*table);
    return;
  }
  // The streaming input: the scan, then an epoch through the shuffle buffer.
  training::DataConfig config;
  config.format = "tfrecord";
  config.train = {path};
  config.features = options.feature_keys;
  config.label = options.label_key;
  config.targets = options.target_keys;
  config.skip_corrupt_records = options.records.skip_corrupt;
  StatusOr<training::DataScan> scan = training::ScanTrainingFiles(config, config.train);
  if (!scan.ok()) return;
  StatusOr<std::unique_ptr<training::StreamingPipeline>> pipeline = training::StreamingPipeline::Create(
      *scan, {.batch_size = 3, .shuffle_buffer = 4, .seed = mode, .prefetch = (mode & 16) != 0 ? 1 : 0,
              .records = training::RecordOptions(config), .limits = {.num_classes = 1 << 20, .last_layer = "out"}});
  if (!pipeline.ok()) return;
  while ((*pipeline)->Next() != nullptr) {
  }
}

}  // namespace lockstep::fuzz
