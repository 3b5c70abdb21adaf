// Whole training runs on streamed data: the same bits as the in-memory mode where the order is
// the same, gzip TFRecord shards with a resume mid-file, and bad streamed data named by file
// and line (or record offset).
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "runtime/bundle/bundle.h"
#include "tensorflow/core/example/example.pb.h"
#include "training/config.h"
#include "training/data/csv_reader.h"
#include "runtime/tfrecord.h"
#include "training/trainer.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

class StreamingTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lockstep_streaming_train_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ifstream in(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv");
    std::string line;
    std::getline(in, header_);
    while (std::getline(in, line)) rows_.push_back(line);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Digits rows [begin, end) as a CSV file.
  std::string Csv(const std::string& name, size_t begin, size_t end) const {
    std::ofstream out(dir_ / name);
    out << header_ << "\n";
    for (size_t i = begin; i < end; ++i) out << rows_[i] << "\n";
    return (dir_ / name).string();
  }

  // Digits rows [begin, end) as gzip-compressed tf.train.Examples: "pixels" (64 floats), "label".
  std::string GzipExamples(const std::string& name, size_t begin, size_t end) const {
    StatusOr<LabelledTable> t = ReadCsv(Csv(name + ".csv", begin, end), {});
    EXPECT_TRUE(t.ok());
    const std::string path = (dir_ / name).string();
    gzFile out = gzopen(path.c_str(), "wb");
    for (int64_t r = 0; r < t->num_rows(); ++r) {
      tensorflow::Example e;
      auto& f = *e.mutable_features()->mutable_feature();
      for (float v : t->row(r)) f["pixels"].mutable_float_list()->add_value(v);
      f["label"].mutable_int64_list()->add_value(t->labels[static_cast<size_t>(r)]);
      const std::string framed = FrameTfRecord(e.SerializeAsString());
      gzwrite(out, framed.data(), static_cast<unsigned>(framed.size()));
    }
    gzclose(out);
    return path;
  }

  TrainConfig Config(const std::string& mode) const {
    TrainConfig c;
    c.data.mode = mode;
    c.data.test_fraction = 0;
    c.data.shuffle_buffer = 500;
    LayerConfig hidden, out;
    hidden.type = out.type = "dense";
    hidden.units = 32;
    hidden.activation = "relu";
    out.units = 10;
    out.activation = "softmax";
    c.model.layers = {hidden, out};
    c.epochs = 3;
    c.replicas = 1;
    c.optimizer.learning_rate = 0.005;
    return c;
  }

  fs::path dir_;
  std::string header_;
  std::vector<std::string> rows_;
};

// One file streamed through the same shuffle buffer as the table: the same batches, so the
// same weights and the same test probabilities, to the bit.
TEST_F(StreamingTrainTest, OneFileStreamedTrainsAsTheTableDoes) {
  TrainConfig memory = Config("memory");
  memory.data.train = {Csv("train.csv", 0, 1400)};
  memory.data.test = {Csv("test.csv", 1400, rows_.size())};
  TrainConfig streaming = memory;
  streaming.data.mode = "streaming";
  StatusOr<TrainReport> a = Train(memory, "digits", {.keep_test_predictions = true});
  StatusOr<TrainReport> b = Train(streaming, "digits", {.keep_test_predictions = true});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->steps, b->steps);
  EXPECT_EQ(a->test_probabilities, b->test_probabilities);
  EXPECT_GT(b->test_accuracy, 0.85);
}

// Gzip TFRecord shards found by a pattern, interleaved and shuffled, cut mid-epoch (mid-file)
// and resumed: the resumed run exports the uninterrupted one's weights.
TEST_F(StreamingTrainTest, GzipShardsResumeMidFile) {
  TrainConfig c = Config("streaming");
  c.data.format = "tfrecord";
  c.data.features = {"pixels"};
  for (size_t s = 0; s < 3; ++s) GzipExamples("train-" + std::to_string(s) + ".tfrecord.gz", s * 450, (s + 1) * 450);
  c.data.train = {(dir_ / "train-*.tfrecord.gz").string()};
  c.data.test = {GzipExamples("test.tfrecord.gz", 1350, rows_.size())};
  c.data.interleave = 2;
  c.data.shuffle_buffer = 200;
  c.checkpoint.dir = (dir_ / "checkpoints").string();
  c.checkpoint.every_steps = 10;
  TrainConfig straight = c;
  straight.checkpoint.dir.clear();
  straight.export_.dir = (dir_ / "straight").string();
  StatusOr<TrainReport> whole = Train(straight, "digits");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_GT(whole->test_accuracy, 0.85);

  c.export_.dir = (dir_ / "resumed").string();
  StatusOr<TrainReport> part = Train(c, "digits", {.stop_after_steps = 55});  // epoch 2, batch 13
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_TRUE(part->stopped_early);
  StatusOr<TrainReport> resumed = Train(c, "digits", {.resume = true});
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->steps, whole->steps);
  StatusOr<Model> a = ReadBundle(whole->export_path);
  StatusOr<Model> b = ReadBundle(resumed->export_path);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& [name, tensor] : a->weights) EXPECT_TRUE(tensor.BitwiseEqual(b->weights.at(name))) << name;
  EXPECT_EQ(a->graph.metadata.at("data_fingerprint"), b->graph.metadata.at("data_fingerprint"));
  EXPECT_TRUE(a->graph.metadata.at("data_fingerprint").starts_with("crc32c-records:"));
}

TEST_F(StreamingTrainTest, BadStreamedRowsAreNamedByFileAndLine) {
  TrainConfig c = Config("streaming");
  c.data.train = {Csv("train.csv", 0, 300)};
  {
    std::ofstream out(c.data.train[0], std::ios::app);
    out << std::string(64, ',') << "\n";  // a row of 65 empty fields
  }
  StatusOr<TrainReport> report = Train(c, "digits");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(), c.data.train[0] + ":302: column 'pixel_0': '' is not a finite number");

  c.data.train = {Csv("labels.csv", 0, 300)};
  c.model.layers.back().units = 9;  // the model has outputs for 0-8 only
  report = Train(c, "digits");
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find(c.data.train[0] + ":"), std::string::npos) << report.status().message();
  EXPECT_NE(report.status().message().find(": label 'label' is 9, but the model has 9 outputs (model.layers[1])"),
            std::string::npos)
      << report.status().message();
}

TEST(StreamingConfigTest, StreamingCannotSplitTheTrainingFiles) {
  StatusOr<TrainConfig> c = ParseTrainConfig(
      R"({"data": {"train": "a.csv", "mode": "streaming"}, "model": {"layers": [{"type": "dense", "units": 2}]}})",
      "s.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("s.json: data.mode: is streaming, which reads the training files as they are"),
            std::string::npos)
      << c.status().message();
  c = ParseTrainConfig(
      R"({"data": {"train": "a.csv", "mode": "streaming", "test": "t.csv", "interleave": 8, "shards": 4,
          "compression": "gzip", "stats_sample": 1000}, "model": {"layers": [{"type": "dense", "units": 2}]}})",
      "s.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ParseTrainConfig(TrainConfigToJson(*c), "again").value(), *c);
}

}  // namespace
}  // namespace lockstep::training
