// The streaming input (training/data/streaming_pipeline.h) against the in-memory pipeline,
// file patterns, gzip TFRecords, shards dealt to 1-4 workers, resuming mid-file, damaged
// records, a one-record data set and the memory it keeps; then whole training runs streamed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "tensorflow/core/example/example.pb.h"
#include "training/data/data_scan.h"
#include "training/data/file_patterns.h"
#include "training/data/pipeline.h"
#include "training/data/streaming_pipeline.h"
#include "runtime/tfrecord.h"
#include "training/trainer.h"
#include "tests/training/drain_epoch.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("lockstep_streaming_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Example i: feature "x" = (i, 10 i), label i % 3, so a batch shows which rows it holds.
std::string ExampleRecord(int64_t i) {
  tensorflow::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f["x"].mutable_float_list()->add_value(static_cast<float>(i));
  f["x"].mutable_float_list()->add_value(static_cast<float>(10 * i));
  f["label"].mutable_int64_list()->add_value(i % 3);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);  // map keys in order: the same bytes every time
    e.SerializeToCodedStream(&coded);
  }
  return bytes;
}

// Rows [begin, end) as one TFRecord file, gzip-compressed when asked.
std::string WriteRows(const std::string& path, int64_t begin, int64_t end, bool gzip = false) {
  std::string bytes;
  for (int64_t i = begin; i < end; ++i) bytes += FrameTfRecord(ExampleRecord(i));
  if (gzip) {
    gzFile out = gzopen(path.c_str(), "wb");
    gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(out);
  } else {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return path;
}

DataConfig ExampleData(std::vector<std::string> files) {
  DataConfig data;
  data.format = "tfrecord";
  data.features = {"x"};
  data.train = std::move(files);
  data.test_fraction = 0;
  return data;
}

DataScan Scan(const DataConfig& data) {
  StatusOr<DataScan> scan = ScanTrainingFiles(data, data.train);
  EXPECT_TRUE(scan.ok()) << scan.status().ToString();
  return scan.ok() ? std::move(scan.value()) : DataScan{};
}

using test::DrainEpoch;

std::unique_ptr<StreamingPipeline> Stream(const DataScan& scan, StreamingOptions options) {
  StatusOr<std::unique_ptr<StreamingPipeline>> p = StreamingPipeline::Create(scan, std::move(options));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p.value()) : nullptr;
}

TEST(FilePatternsTest, ExpandsInSortedOrderAndNamesWhatMatchesNothing) {
  TempDir dir;
  for (const char* name : {"train-2.tfrecord", "train-0.tfrecord", "train-1.tfrecord", "test.tfrecord"})
    std::ofstream(dir.File(name)) << "";
  fs::create_directories(dir.File("train-9.tfrecord"));  // a directory is not a file
  StatusOr<std::vector<std::string>> files = ExpandFilePatterns({dir.File("train-*.tfrecord")});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(*files, (std::vector<std::string>{dir.File("train-0.tfrecord"), dir.File("train-1.tfrecord"),
                                              dir.File("train-2.tfrecord")}));
  EXPECT_EQ(ExpandFilePatterns({dir.File("plain.csv")}).value(), std::vector<std::string>{dir.File("plain.csv")});
  std::ofstream(dir.File("data[1].csv")) << "";  // a file named as it is, brackets and all
  EXPECT_EQ(ExpandFilePatterns({dir.File("data[1].csv")}).value(), std::vector<std::string>{dir.File("data[1].csv")});
  EXPECT_EQ(ExpandFilePatterns({dir.File("valid-*")}).status().message(),
            "'" + dir.File("valid-*") + "' matches no file");
  EXPECT_EQ(ExpandFilePatterns({dir.File("train-1.tfrecord"), dir.File("train-?.tfrecord")}).status().message(),
            "'" + dir.File("train-1.tfrecord") + "' is listed twice");
}

TEST(GzipTfRecordTest, ReadsWhatTensorFlowWritesCompressed) {
  TempDir dir;
  const std::string plain = WriteRows(dir.File("plain.tfrecord"), 0, 50);
  const std::string gz = WriteRows(dir.File("rows.tfrecord.gz"), 0, 50, true);
  for (auto compression : {TfRecordReader::Options::Compression::kAuto, TfRecordReader::Options::Compression::kGzip}) {
    StatusOr<TfRecordReader> reader = TfRecordReader::Open(gz, {.compression = compression});
    ASSERT_TRUE(reader.ok());
    EXPECT_TRUE(reader->compressed());
    std::string record;
    for (int64_t i = 0; i < 50; ++i) {
      ASSERT_TRUE(reader->Next(&record).value()) << i;
      EXPECT_EQ(record, ExampleRecord(i));
    }
    EXPECT_FALSE(reader->Next(&record).value());
  }
  EXPECT_FALSE(TfRecordReader::Open(plain).value().compressed());
  // Told "gzip", a plain file is refused rather than read through.
  EXPECT_EQ(TfRecordReader::Open(plain, {.compression = TfRecordReader::Options::Compression::kGzip}).status().message(),
            "'" + plain + "' is not gzip-compressed (data.compression is \"gzip\")");
  // Told "none", a gzip file is framing that does not check.
  std::string record;
  EXPECT_EQ(TfRecordReader::Open(gz, {.compression = TfRecordReader::Options::Compression::kNone})
                .value()
                .Next(&record)
                .status()
                .code(),
            StatusCode::kDataLoss);
  // A compressed file cut short is damage, named, not a short file.
  const std::string cut = dir.File("cut.tfrecord.gz");
  fs::copy_file(gz, cut);
  fs::resize_file(cut, fs::file_size(gz) / 2);
  StatusOr<TfRecordReader> reader = TfRecordReader::Open(cut);
  ASSERT_TRUE(reader.ok());
  Status error;
  while (true) {
    StatusOr<bool> more = reader->Next(&record);
    if (!more.ok()) {
      error = more.status();
      break;
    }
    ASSERT_TRUE(*more) << "a truncated gzip stream ended as if whole";
  }
  EXPECT_EQ(error.code(), StatusCode::kDataLoss);
  EXPECT_NE(error.message().find("cut.tfrecord.gz: record at offset"), std::string::npos) << error.message();
}

// One file, one shard, one file at a time: the streaming batches are the in-memory pipeline's,
// bit for bit, with and without shuffling, for several epochs.
TEST(StreamingPipelineTest, MatchesTheInMemoryPipelineOnOneFile) {
  TempDir dir;
  const DataConfig data = ExampleData({WriteRows(dir.File("rows.tfrecord.gz"), 0, 203, true)});
  const DataScan scan = Scan(data);
  EXPECT_EQ(scan.total_records(), 203);
  LabelledTable table;
  table.feature_names = {"x[0]", "x[1]"};
  for (int64_t i = 0; i < 203; ++i) {
    table.features.insert(table.features.end(), {static_cast<float>(i), static_cast<float>(10 * i)});
    table.labels.push_back(static_cast<int32_t>(i % 3));
  }
  std::vector<int64_t> rows(203);
  std::iota(rows.begin(), rows.end(), 0);
  for (int64_t buffer : {0, 16, 1000}) {
    BatchPipeline memory(table, rows, {.batch_size = 10, .shuffle_buffer = buffer, .seed = 3});
    auto stream = Stream(scan, {.batch_size = 10, .shuffle_buffer = buffer, .seed = 3, .interleave = 4});
    ASSERT_NE(stream, nullptr);
    EXPECT_EQ(stream->batches_per_epoch(), memory.batches_per_epoch());
    for (int64_t epoch : {0, 1, 5}) {
      memory.StartEpoch(epoch);
      stream->StartEpoch(epoch);
      EXPECT_EQ(DrainEpoch(*stream), DrainEpoch(memory)) << "buffer " << buffer << " epoch " << epoch;
    }
  }
}

// Files dealt to 1-4 shards (more files than shards, and fewer): each process opens only its
// own shards' files, every row of an epoch is used at most once, and the global batch
// assembled by one process owning every shard is the concatenation of each shard's part.
TEST(StreamingPipelineTest, ShardsDealFilesAndMakeTheSameGlobalBatch) {
  TempDir dir;
  for (int files : {1, 3}) {
    std::vector<std::string> paths;
    for (int f = 0; f < files; ++f) {
      paths.push_back(WriteRows(dir.File(std::to_string(files) + "-" + std::to_string(f) + ".tfrecord"),
                                f * 100, f * 100 + 90 + 5 * f));
    }
    const DataScan scan = Scan(ExampleData(paths));
    for (int shards = 1; shards <= 4; ++shards) {
      const StreamingOptions base{.batch_size = 8, .shuffle_buffer = 20, .seed = 7, .interleave = 2,
                                  .num_shards = shards, .first_shard = 0, .end_shard = shards};
      auto whole = Stream(scan, base);
      ASSERT_NE(whole, nullptr);
      whole->StartEpoch(2);
      const auto global = DrainEpoch(*whole);
      std::vector<std::vector<std::vector<int64_t>>> parts;
      std::set<size_t> files_opened;
      for (int s = 0; s < shards; ++s) {
        StreamingOptions one = base;
        one.first_shard = s;
        one.end_shard = s + 1;
        auto p = Stream(scan, one);
        ASSERT_NE(p, nullptr);
        for (size_t f : p->files_read()) {
          if (files >= shards) {
            EXPECT_TRUE(files_opened.insert(f).second) << "file " << f << " read twice";
          }
        }
        p->StartEpoch(2);
        parts.push_back(DrainEpoch(*p));
        ASSERT_EQ(parts.back().size(), global.size());
      }
      std::set<int64_t> seen;
      for (size_t b = 0; b < global.size(); ++b) {
        std::vector<int64_t> joined;
        for (const auto& part : parts) joined.insert(joined.end(), part[b].begin(), part[b].end());
        EXPECT_EQ(joined, global[b]) << files << " files, " << shards << " shards, batch " << b;
        if (shards > 1) {
          EXPECT_EQ(global[b].size(), 8u) << "several shards make whole batches only";
        }
        for (int64_t row : global[b]) EXPECT_TRUE(seen.insert(row).second) << "row " << row << " twice";
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), whole->rows_per_epoch());
    }
  }
}

// A run resumed at epoch e, batch b (StartEpoch, Skip) sees the uninterrupted run's batches,
// whether the Skip comes before anything was read ahead or after.
TEST(StreamingPipelineTest, SkipResumesMidFile) {
  TempDir dir;
  const DataScan scan =
      Scan(ExampleData({WriteRows(dir.File("a.tfrecord"), 0, 70), WriteRows(dir.File("b.tfrecord.gz"), 100, 160, true)}));
  const StreamingOptions options{.batch_size = 6, .shuffle_buffer = 25, .seed = 9, .interleave = 2, .prefetch = 3};
  auto whole = Stream(scan, options);
  whole->StartEpoch(3);
  const auto all = DrainEpoch(*whole);
  for (bool read_first : {false, true}) {
    auto resumed = Stream(scan, options);
    resumed->StartEpoch(3);
    if (read_first) {
      ASSERT_NE(resumed->Next(), nullptr);
    }
    resumed->Skip(7);
    const int64_t from = read_first ? 8 : 7;
    std::vector<std::vector<int64_t>> rest = DrainEpoch(*resumed, from);
    ASSERT_EQ(rest.size() + static_cast<size_t>(from), all.size());
    for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], all[i + static_cast<size_t>(from)]) << i;
  }
}

TEST(StreamingPipelineTest, ADamagedRecordMidShardIsNamedOrSkipped) {
  TempDir dir;
  const std::string path = WriteRows(dir.File("rows.tfrecord"), 0, 40);
  DataConfig data = ExampleData({path});
  const DataScan scan = Scan(data);
  // Damage record 20's data after the scan (as a disk would): its CRC no longer matches.
  const int64_t offset = 20 * static_cast<int64_t>(FrameTfRecord(ExampleRecord(20)).size());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset + 14);
    f.put('\x7f');
  }
  auto p = Stream(scan, {.batch_size = 8, .prefetch = 1});
  int64_t batches = 0;
  while (p->Next() != nullptr) ++batches;
  EXPECT_EQ(batches, 2);  // rows 0-15 in two batches; the third holds record 20
  EXPECT_EQ(p->status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(p->status().message(), path + ": record at offset " + std::to_string(offset) + ": the data's CRC does not match");

  // Skipping corrupt records, the scan counts 39 and the epoch never asks for the 40th.
  data.skip_corrupt_records = true;
  const DataScan skipping = Scan(data);
  EXPECT_EQ(skipping.total_records(), 39);
  auto q = Stream(skipping, {.batch_size = 8, .records = RecordOptions(data)});
  const auto batches_read = DrainEpoch(*q);
  int64_t rows = 0;
  for (const auto& b : batches_read) {
    rows += static_cast<int64_t>(b.size());
    EXPECT_EQ(std::count(b.begin(), b.end(), 20), 0);
  }
  EXPECT_EQ(rows, 39);
}

// The scan reads every record's label even past its sample for the statistics: a class first
// seen late, or a bad label, is named before the first step, not mid-epoch.
TEST(StreamingPipelineTest, TheScanKnowsEveryLabelWhateverItsSample) {
  TempDir dir;
  const std::string path = dir.File("rows.csv");
  {
    std::ofstream out(path);
    out << "x,label\n";
    for (int i = 0; i < 50; ++i) out << i << "," << (i < 40 ? "cat" : "dog") << "\n";
  }
  DataConfig data;
  data.train = {path};
  data.test_fraction = 0;
  data.stats_sample = 10;
  const DataScan scan = Scan(data);
  EXPECT_EQ(scan.stats_rows, 10);
  EXPECT_EQ(scan.format.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(scan.total_records(), 50);
  std::ofstream(path, std::ios::app) << "50,\n";
  StatusOr<DataScan> bad = ScanTrainingFiles(data, data.train);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), path + ":52: column 'label': the label is empty");
}

// A failure in a batch made ahead, then a Skip that lands before it (a resumed run): the
// batches before the failure come out, then the failure, never a wait for a batch no one makes.
TEST(BatchRingTest, ASkipAfterAFailureMadeAheadEndsWithTheFailure) {
  for (int prefetch : {0, 1, 4}) {
    BatchRing ring(2, 1, 0, prefetch, 1, [](int64_t index, BatchBuffers& out) -> Status {
      if (index == 3) return DataLoss("batch 3 is damaged");
      out.features[0] = static_cast<float>(index);
      out.rows = out.global_rows = 1;
      return Status::Ok();
    });
    ring.Start(6, [] {});
    if (prefetch > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it fail ahead
    ring.Skip(1);
    std::vector<int64_t> seen;
    while (const Batch* b = ring.Next()) seen.push_back(static_cast<int64_t>(b->features.data<float>()[0]));
    EXPECT_EQ(seen, (std::vector<int64_t>{1, 2})) << "prefetch " << prefetch;
    EXPECT_EQ(ring.status().message(), "batch 3 is damaged") << "prefetch " << prefetch;
    ring.Start(2, [] {});  // a new epoch starts clean
    EXPECT_NE(ring.Next(), nullptr);
    EXPECT_TRUE(ring.status().ok());
  }
}

TEST(StreamingPipelineTest, OneRecordIsADataSet) {
  TempDir dir;
  const DataScan scan = Scan(ExampleData({WriteRows(dir.File("one.tfrecord"), 5, 6)}));
  auto p = Stream(scan, {.batch_size = 32, .shuffle_buffer = 10000, .interleave = 4, .prefetch = 2});
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    p->StartEpoch(epoch);
    EXPECT_EQ(DrainEpoch(*p), (std::vector<std::vector<int64_t>>{{5}}));
  }
  EXPECT_EQ(p->buffered_rows_capacity(), 1);
}

// What the streaming input keeps of the data is its shuffle buffer, however large the files:
// the bound is set by the options, not by the data.
TEST(StreamingPipelineTest, TheBufferNotTheDataBoundsWhatIsHeld) {
  TempDir dir;
  std::vector<std::string> files;
  for (int f = 0; f < 4; ++f) files.push_back(WriteRows(dir.File(std::to_string(f) + ".tfrecord"), f * 5000, (f + 1) * 5000));
  const DataScan scan = Scan(ExampleData(files));
  auto p = Stream(scan, {.batch_size = 64, .shuffle_buffer = 500, .seed = 1, .interleave = 4});
  EXPECT_EQ(p->buffered_rows_capacity(), 500);
  std::set<int64_t> seen;
  for (const auto& b : DrainEpoch(*p)) seen.insert(b.begin(), b.end());
  EXPECT_EQ(static_cast<int64_t>(seen.size()), 20000);
  // Interleaving four files, the first batch already holds rows of every file.
  p->StartEpoch(0);
  const Batch* first = p->Next();
  ASSERT_NE(first, nullptr);
  std::set<int64_t> files_in_first;
  for (int64_t r = 0; r < first->rows; ++r)
    files_in_first.insert(static_cast<int64_t>(first->features.data<float>()[static_cast<size_t>(2 * r)]) / 5000);
  EXPECT_EQ(files_in_first.size(), 4u);
}

}  // namespace
}  // namespace lockstep::training
