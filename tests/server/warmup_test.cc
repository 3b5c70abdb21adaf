// TensorFlow Serving's warm-up files replayed on a loaded version (server/warmup.h): every kind
// of log TF Serving replays, on TF Serving's own half_plus_two SavedModel, and each way a file
// can be wrong, named by record and byte offset.
#include "server/warmup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model_store/loader.h"
#include "runtime/tfrecord.h"
#include "tensorflow/core/example/example.pb.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tests/common/scratch_dir.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
namespace tfs = tensorflow::serving;

const fs::path kHalfPlusTwo =
    fs::path(LOCKSTEP_SOURCE_DIR) / "tests/data/tf_saved_models/saved_model_half_plus_two_cpu/00000123";

tfs::PredictRequest PredictX(std::initializer_list<float> values, const std::string& signature = "") {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("whatever");  // not read: the replay runs on its version
  request.mutable_model_spec()->set_signature_name(signature);
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  for (float v : values) x.add_float_val(v);
  return request;
}

tfs::Input ExamplesOfX(float x) {
  tfs::Input input;
  tensorflow::Example& example = *input.mutable_example_list()->add_examples();
  (*example.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(x);
  return input;
}

// One of each kind TF Serving replays: 1 + 2 + 1 + 1 + 1 requests.
std::vector<tfs::PredictionLog> EveryKindOfLog() {
  std::vector<tfs::PredictionLog> logs(5);
  *logs[0].mutable_predict_log()->mutable_request() = PredictX({1, 2, 5});
  *logs[1].mutable_predict_streamed_log()->add_request() = PredictX({1});
  *logs[1].mutable_predict_streamed_log()->add_request() = PredictX({2, 3}, "serving_default");
  tfs::ClassificationRequest& classify = *logs[2].mutable_classify_log()->mutable_request();
  classify.mutable_model_spec()->set_signature_name("classify_x_to_y");
  *classify.mutable_input() = ExamplesOfX(1);
  tfs::RegressionRequest& regress = *logs[3].mutable_regress_log()->mutable_request();
  regress.mutable_model_spec()->set_signature_name("regress_x_to_y");
  *regress.mutable_input() = ExamplesOfX(2);
  tfs::MultiInferenceRequest& multi = *logs[4].mutable_multi_inference_log()->mutable_request();
  for (const auto& [signature, method] : {std::pair{"classify_x_to_y", "tensorflow/serving/classify"},
                                          std::pair{"regress_x_to_y", "tensorflow/serving/regress"}}) {
    tfs::InferenceTask& task = *multi.add_tasks();
    task.mutable_model_spec()->set_name("m");
    task.mutable_model_spec()->set_signature_name(signature);
    task.set_method_name(method);
  }
  *multi.mutable_input() = ExamplesOfX(3);
  return logs;
}

class WarmupTest : public ::testing::Test {
 protected:
  // A copy of TF Serving's half_plus_two version, with `records` as its warm-up file.
  void WriteVersion(const std::vector<std::string>& records) {
    fs::copy(kHalfPlusTwo, version_dir_, fs::copy_options::recursive);
    fs::create_directories(version_dir_ / "assets.extra");
    StatusOr<TfRecordWriter> writer = TfRecordWriter::Create(warmup_file_.string());
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    for (const std::string& record : records) ASSERT_TRUE(writer->Write(record).ok());
    ASSERT_TRUE(writer->Flush().ok());
  }
  void WriteVersion(const std::vector<tfs::PredictionLog>& logs) {
    std::vector<std::string> records;
    for (const tfs::PredictionLog& log : logs) records.push_back(log.SerializeAsString());
    WriteVersion(records);
  }
  StatusOr<WarmupReplay> Replay(int iterations = 1) {
    StatusOr<std::shared_ptr<const LoadedVersion>> loaded = LoadVersion("m", 1, version_dir_, {});
    if (!loaded.ok()) return loaded.status();
    return ReplayWarmupFile(*loaded, iterations);
  }
  // The error of a replay that must fail.
  std::string ErrorOf(int iterations = 1) {
    StatusOr<WarmupReplay> replay = Replay(iterations);
    EXPECT_FALSE(replay.ok());
    return replay.ok() ? "" : replay.status().message();
  }

  test::ScratchDir dir_;
  const fs::path version_dir_ = dir_ / "1";
  const fs::path warmup_file_ = version_dir_ / "assets.extra/tf_serving_warmup_requests";
};

TEST_F(WarmupTest, EveryKindOfLogRunsItsIterations) {
  WriteVersion(EveryKindOfLog());
  StatusOr<WarmupReplay> once = Replay(1);
  ASSERT_TRUE(once.ok()) << once.status().ToString();
  EXPECT_EQ(once->records, 5);
  EXPECT_EQ(once->runs, 6);
  StatusOr<WarmupReplay> thrice = Replay(3);
  ASSERT_TRUE(thrice.ok()) << thrice.status().ToString();
  EXPECT_EQ(thrice->records, 5);
  EXPECT_EQ(thrice->runs, 18);
}

TEST_F(WarmupTest, AVersionWithoutAFileReplaysNothing) {
  fs::copy(kHalfPlusTwo, version_dir_, fs::copy_options::recursive);
  StatusOr<WarmupReplay> replay = Replay();
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(replay->records, 0);
  EXPECT_EQ(replay->runs, 0);
}

TEST_F(WarmupTest, AFailingRecordIsNamedByNumberAndOffset) {
  std::vector<tfs::PredictionLog> logs = EveryKindOfLog();
  logs[2].mutable_classify_log()->mutable_request()->mutable_model_spec()->set_signature_name("no_such_signature");
  WriteVersion(logs);
  const int64_t offset = 2 * 16 + static_cast<int64_t>(logs[0].ByteSizeLong() + logs[1].ByteSizeLong());
  EXPECT_EQ(ErrorOf(), "warm-up record 2 (at byte " + std::to_string(offset) + ") of " + warmup_file_.string() +
                           ": Serving signature name: \"no_such_signature\" not found in signature def");
}

TEST_F(WarmupTest, RequestErrorsAreTheApisOwn) {
  tfs::PredictionLog wrong_input;
  *wrong_input.mutable_predict_log()->mutable_request() = PredictX({1});
  (*wrong_input.mutable_predict_log()->mutable_request()->mutable_inputs())["y"] =
      wrong_input.predict_log().request().inputs().at("x");
  tfs::PredictionLog one_model;
  *one_model.mutable_multi_inference_log() = EveryKindOfLog()[4].multi_inference_log();
  one_model.mutable_multi_inference_log()->mutable_request()->mutable_tasks(1)->mutable_model_spec()->set_name("n");
  tfs::PredictionLog no_requests;
  no_requests.mutable_predict_streamed_log();
  const struct {
    tfs::PredictionLog log;
    std::string error;
  } cases[] = {
      {wrong_input, "input 'y' is not an input of signature 'serving_default'"},
      {one_model, "All ModelSpecs in a MultiInferenceRequest must access the same model name."},
      {no_requests, "its predict_streamed_log holds no request"},
  };
  for (const auto& c : cases) {
    fs::remove_all(version_dir_);
    WriteVersion(std::vector<tfs::PredictionLog>{c.log});
    EXPECT_EQ(ErrorOf(), "warm-up record 0 (at byte 0) of " + warmup_file_.string() + ": " + c.error);
  }
}

TEST_F(WarmupTest, RecordsThatAreNotReplayableLogsAreRefused) {
  // Field 5 is upstream's session_run_log: read as an unknown field, so no log is set.
  const std::string session_run_log("\x2a\x00", 2);
  const std::string not_a_proto("\xff\xff\xff", 3);
  WriteVersion(std::vector<std::string>{EveryKindOfLog()[0].SerializeAsString(), session_run_log});
  const std::string error = ErrorOf();
  EXPECT_NE(error.find("warm-up record 1 (at byte "), std::string::npos) << error;
  EXPECT_NE(error.find(": it holds a session_run_log (TensorFlow's Session.Run)"), std::string::npos) << error;
  fs::remove_all(version_dir_);
  WriteVersion(std::vector<std::string>{not_a_proto});
  EXPECT_EQ(ErrorOf(),
            "warm-up record 0 (at byte 0) of " + warmup_file_.string() + " is not a tensorflow.serving.PredictionLog");
}

// A record holding no log (only its metadata, or nothing) is skipped, as upstream skips it.
TEST_F(WarmupTest, RecordsWithNoLogAreSkipped) {
  tfs::PredictionLog metadata_only;
  metadata_only.mutable_log_metadata()->mutable_model_spec()->set_name("m");
  WriteVersion(std::vector<std::string>{metadata_only.SerializeAsString(), std::string(),
                                        EveryKindOfLog()[0].SerializeAsString()});
  StatusOr<WarmupReplay> replay = Replay(2);
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(replay->records, 3);
  EXPECT_EQ(replay->runs, 2);
}

TEST_F(WarmupTest, MoreThanAThousandRecordsAreRefused) {
  const std::string record = EveryKindOfLog()[0].SerializeAsString();
  WriteVersion(std::vector<std::string>(kMaxTfServingWarmupRecords, record));
  StatusOr<WarmupReplay> replay = Replay();
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(replay->records, kMaxTfServingWarmupRecords);
  fs::remove_all(version_dir_);
  WriteVersion(std::vector<std::string>(kMaxTfServingWarmupRecords + 1, record));
  EXPECT_EQ(ErrorOf(), warmup_file_.string() + " holds more than 1000 records, TensorFlow Serving's limit");
}

TEST_F(WarmupTest, ACorruptFileIsNamedWithItsOffset) {
  WriteVersion(EveryKindOfLog());
  const int64_t second = 16 + static_cast<int64_t>(EveryKindOfLog()[0].ByteSizeLong());
  {
    std::fstream file(warmup_file_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(second + 12);  // the second record's first data byte
    file.put('\x7f');
  }
  const std::string error = ErrorOf();
  EXPECT_NE(error.find(warmup_file_.string()), std::string::npos) << error;
  EXPECT_NE(error.find(std::to_string(second)), std::string::npos) << error;
}

}  // namespace
}  // namespace lockstep
