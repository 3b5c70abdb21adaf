// model-train as a user runs it: the real binary on the repository's digits config.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/bundle/bundle.h"
#include "tensorflow/core/example/example.pb.h"
#include "runtime/tfrecord.h"
#include "tests/common/run_command.h"

namespace lockstep::training {
namespace {

using Result = test::CommandResult;
using test::RunCommand;

Result RunModelTrain(const std::string& args) {
  return RunCommand("cd " + std::string(LOCKSTEP_SOURCE_DIR) + " && " + MODEL_TRAIN_PATH + " " + args);
}

class ModelTrainCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("lockstep_model_train_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Writes <name>.csv holding `csv` and <name>.json training a dense layer of `units` on all of
  // it, exporting to <dir>/never; returns the CSV's path.
  std::string CsvConfig(const std::string& name, const std::string& csv, int units) {
    const std::filesystem::path path = dir_ / (name + ".csv");
    std::ofstream(path) << csv;
    std::ofstream(dir_ / (name + ".json"))
        << R"({"data": {"train": ")" << path.string() << R"(", "split": {"test": 0}},
      "model": {"layers": [{"type": "dense", "units": )"
        << units << R"(}]}, "export": {"dir": ")" << (dir_ / "never").string() << R"("}})";
    return path.string();
  }
  std::filesystem::path dir_;
};

TEST_F(ModelTrainCliTest, TrainsDigitsAndExportsVersionAfterVersion) {
  const std::string exports = (dir_ / "models").string();
  Result r = RunModelTrain("--config config/train/digits.json --epochs 5 --export_dir " + exports);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("event=epoch epoch=5/5 loss="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("samples_per_s="), std::string::npos);
  EXPECT_NE(r.output.find("exported " + exports + "/1"), std::string::npos) << r.output;
  StatusOr<Model> bundle = ReadBundle(exports + "/1");
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  EXPECT_EQ(bundle.value().graph.metadata.at("model_name"), "digits");
  EXPECT_EQ(bundle.value().graph.metadata.at("trained_steps"), "200");
  EXPECT_GT(std::stod(bundle.value().graph.metadata.at("test_accuracy")), 0.9);

  r = RunModelTrain("--config config/train/digits.json --epochs 1 --export_dir " + exports);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(exports + "/2/model.pb"));
}

TEST_F(ModelTrainCliTest, BadConfigsAndFlagsAreNamedAndNothingIsExported) {
  const std::filesystem::path bad = dir_ / "bad.json";
  std::ofstream(bad) << R"({"data": {"train": "examples/data/digits.csv"},
    "model": {"layers": [{"type": "dense", "units": 10}]}, "optimizer": {"learnig_rate": 0.1},
    "export": {"dir": ")"
                     << (dir_ / "never").string() << R"("}})";
  Result r = RunModelTrain("--config " + bad.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.output.find(bad.string() + ": optimizer.learnig_rate: unknown key (did you mean 'learning_rate'?)"),
      std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never"));

  r = RunModelTrain("--config config/train/digits.json --epochs zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--epochs must be an integer >= 1"), std::string::npos) << r.output;
  r = RunModelTrain("--confg x.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown flag --confg"), std::string::npos) << r.output;

  // A CSV with a ragged row: named by file and line, and no bundle.
  const std::string csv = CsvConfig("ragged", "a,b,label\n1,2,0\n3,1\n", 1);
  r = RunModelTrain("--config " + dir_.string() + "/ragged.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(csv + ":3: 2 fields, but the header has 3"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never"));

  // A missing config, a missing data file, a feature that is not a number.
  r = RunModelTrain("--config " + (dir_ / "absent.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("cannot open config '" + (dir_ / "absent.json").string() + "': No such file or directory"),
            std::string::npos)
      << r.output;
  std::ofstream(dir_ / "nodata.json") << R"({"data": {"train": ")" << (dir_ / "absent.csv").string()
                                      << R"("}, "model": {"layers": [{"type": "dense", "units": 2}]}})";
  r = RunModelTrain("--config " + (dir_ / "nodata.json").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot open '" + (dir_ / "absent.csv").string() + "': No such file or directory"),
            std::string::npos)
      << r.output;
  const std::string words = CsvConfig("words", "a,b,label\n1,2,0\n3,four,1\n", 2);
  r = RunModelTrain("--config " + dir_.string() + "/words.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(words + ":3: column 'b': 'four' is not a finite number"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never"));

  EXPECT_EQ(RunModelTrain("--help").exit_code, 0);
}

TEST_F(ModelTrainCliTest, ALabelBeyondTheModelsOutputsNamesTheLine) {
  const std::string csv = CsvConfig("labels", "a,b,label\n1,2,0\n3,1,2\n0,0,5\n", 3);
  const Result r = RunModelTrain("--config " + dir_.string() + "/labels.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(csv + ":4: label 'label' is 5, but the model has 3 outputs (model.layers[0])"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never"));
}

// A TFRecord file with one damaged record: the run stops naming the file and the record's
// offset, and exports nothing; with data.skip_corrupt_records it reports the record, skips it
// and trains on the rest.
TEST_F(ModelTrainCliTest, ADamagedTfRecordIsNamedByOffsetOrSkipped) {
  std::string bytes;
  int64_t damaged_offset = 0;
  for (int i = 0; i < 40; ++i) {
    tensorflow::Example example;
    auto& features = *example.mutable_features()->mutable_feature();
    features["x"].mutable_float_list()->add_value(static_cast<float>(i % 2));
    features["x"].mutable_float_list()->add_value(static_cast<float>(i));
    features["label"].mutable_int64_list()->add_value(i % 2);
    if (i == 7) damaged_offset = static_cast<int64_t>(bytes.size());
    bytes += FrameTfRecord(example.SerializeAsString());
  }
  bytes[static_cast<size_t>(damaged_offset) + 14] ^= 0x01;  // in record 7's data (after 12 header bytes)
  const std::filesystem::path records = dir_ / "train.tfrecord";
  std::ofstream(records, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto write_config = [&](bool skip) {
    const std::filesystem::path config = dir_ / "records.json";
    std::ofstream(config) << R"({"data": {"format": "tfrecord", "train": ")" << records.string()
                          << R"(", "features": ["x"], "split": {"test": 0}, "skip_corrupt_records": )"
                          << (skip ? "true" : "false") << R"(},
      "model": {"layers": [{"type": "dense", "units": 2}]}, "epochs": 2, "export": {"dir": ")"
                          << (dir_ / "models").string() << R"("}})";
    return config.string();
  };
  Result r = RunModelTrain("--config " + write_config(false));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(records.string() + ": record at offset " + std::to_string(damaged_offset) +
                          ": the data's CRC does not match"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "models"));

  r = RunModelTrain("--config " + write_config(true));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("event=tfrecord_corrupt file=" + records.string() + " offset=" +
                          std::to_string(damaged_offset)),
            std::string::npos)
      << r.output;
  StatusOr<Model> bundle = ReadBundle((dir_ / "models" / "1").string());
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  EXPECT_EQ(bundle.value().graph.metadata.at("trained_steps"), "4") << "39 records in 2 batches, twice";
}

}  // namespace
}  // namespace lockstep::training
