// The streaming input allocates nothing per record: once a file is open, reading, checking,
// decoding and shuffling its records into batches makes no heap allocation, for TFRecord
// (plain and gzip) and CSV files. Opening a file, and starting an epoch, may.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "tensorflow/core/example/example.pb.h"
#include "tests/alloc/counting_new.h"
#include "training/data/data_scan.h"
#include "training/data/streaming_pipeline.h"
#include "runtime/tfrecord.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

class StreamingInputAllocTest : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamingInputAllocTest, RecordsIntoBatchesAllocateNothing) {
  const std::string kind = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("lockstep_stream_alloc_" + std::to_string(::getpid()) + kind);
  fs::create_directories(dir);
  DataConfig data;
  data.test_fraction = 0;
  const std::string path = (dir / "rows").string();
  if (kind == "csv") {
    std::ofstream out(path);
    out << "a,b,c,label\n";
    for (int i = 0; i < 3000; ++i) out << i << "," << i * 0.5 << "," << -i << "," << i % 7 << "\n";
  } else {
    std::string bytes;
    tensorflow::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    for (int i = 0; i < 3000; ++i) {
      f["pixels"].mutable_int64_list()->Clear();
      for (int j = 0; j < 64; ++j) f["pixels"].mutable_int64_list()->add_value((i * j) % 256);
      f["label"].mutable_int64_list()->Clear();
      f["label"].mutable_int64_list()->add_value(i % 7);
      bytes += FrameTfRecord(e.SerializeAsString());
    }
    if (kind == "gzip") {
      gzFile out = gzopen(path.c_str(), "wb");
      gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(out);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
    data.format = "tfrecord";
    data.features = {"pixels"};
  }
  data.train = {path};
  StatusOr<DataScan> scan = ScanTrainingFiles(data, data.train);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  StatusOr<std::unique_ptr<StreamingPipeline>> pipeline = StreamingPipeline::Create(
      *scan, {.batch_size = 32, .shuffle_buffer = 500, .seed = 1, .prefetch = 2,
              .records = RecordOptions(data), .limits = {.num_classes = 7, .last_layer = "out"}});
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  StreamingPipeline& p = **pipeline;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    p.StartEpoch(epoch);
    ASSERT_NE(p.Next(), nullptr);  // the file is open, its buffers made, the shuffle buffer full
    const int64_t before = alloc_test::Allocations();
    int64_t batches = 1;
    while (p.Next() != nullptr) ++batches;
    EXPECT_EQ(alloc_test::Allocations() - before, 0) << kind << ", epoch " << epoch;
    EXPECT_EQ(batches, 94);
    ASSERT_TRUE(p.status().ok()) << p.status().ToString();
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Formats, StreamingInputAllocTest, ::testing::Values("tfrecord", "gzip", "csv"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace lockstep::training
