// TensorFlow Serving's warm-up files through the real binary: a SavedModel, a Lockstep bundle
// (the file among its checksummed extras) and an ONNX model each replay theirs before they become available; a new version whose
// warm-up fails never serves and the version before it keeps serving; --enable_model_warmup=false
// skips the replay.
#include <gtest/gtest.h>

#include "runtime/tfrecord.h"
#include "server/warmup.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tests/e2e/rest_test_util.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

const fs::path kHalfPlusTwo =
    fs::path(LOCKSTEP_SOURCE_DIR) / "tests/data/tf_saved_models/saved_model_half_plus_two_cpu/00000123";

// A predict log of x = `values` (shape [rows, width]) for `signature`.
tfs::PredictionLog PredictLog(std::vector<float> values, int64_t width, const std::string& signature = "") {
  tfs::PredictionLog log;
  tfs::PredictRequest& request = *log.mutable_predict_log()->mutable_request();
  request.mutable_model_spec()->set_signature_name(signature);
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  if (width > 1) x.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()) / width);
  x.mutable_tensor_shape()->add_dim()->set_size(width > 1 ? width : static_cast<int64_t>(values.size()));
  for (float v : values) x.add_float_val(v);
  return log;
}

tfs::PredictionLog RegressLog(float x) {
  tfs::PredictionLog log;
  tfs::RegressionRequest& request = *log.mutable_regress_log()->mutable_request();
  request.mutable_model_spec()->set_signature_name("regress_x_to_y");
  auto& feature = *request.mutable_input()->mutable_example_list()->add_examples()->mutable_features();
  (*feature.mutable_feature())["x"].mutable_float_list()->add_value(x);
  return log;
}

// A copy of TF Serving's half_plus_two version at `version_dir`.
void CopyHalfPlusTwo(const fs::path& version_dir) {
  fs::create_directories(version_dir.parent_path());
  fs::copy(kHalfPlusTwo, version_dir, fs::copy_options::recursive);
}

// The warm-up file of `logs`.
std::string WarmupRecords(const std::vector<tfs::PredictionLog>& logs) {
  std::string file;
  for (const tfs::PredictionLog& log : logs) file += FrameTfRecord(log.SerializeAsString());
  return file;
}

void WriteWarmupFile(const fs::path& version_dir, const std::vector<tfs::PredictionLog>& logs) {
  fs::create_directories(version_dir / "assets.extra");
  WriteFile(version_dir / kTfServingWarmupFile, WarmupRecords(logs));
}

TEST(WarmupFileTest, EveryFormatReplaysItsFileBeforeItServes) {
  ScratchDir dir;
  const fs::path models = dir.path() / "models";
  CopyHalfPlusTwo(models / "saved" / "1");
  WriteWarmupFile(models / "saved" / "1", {PredictLog({1, 2}, 1), RegressLog(3)});
  // A bundle carries it among its checksummed files.
  BundleWriteOptions with_warmup;
  with_warmup.extras["tf_serving_warmup_requests"] = WarmupRecords({PredictLog({4}, 1)});
  ASSERT_TRUE(WriteBundle(AffineModel(1, 0), models / "bundle" / "1", with_warmup).ok());
  testing_onnx::MakeMlp().Write(models / "onnx" / "1");
  WriteWarmupFile(models / "onnx" / "1", {PredictLog({1, 2, 3, 4, 5, 6, 7, 8}, 4)});
  std::string config = "model_config_list {";
  for (const char* name : {"saved", "bundle", "onnx"}) {
    config += " config { name: \"" + std::string(name) + "\" base_path: \"" + (models / name).string() + "\" }";
  }
  WriteFile(dir.path() / "models.config", config + " }\n");
  ServerProcess server(dir.path(), {"--model_config_file=" + (dir.path() / "models.config").string(),
                                    "--num_request_iterations_for_warmup=3", "--file_system_poll_wait_seconds=1"});
  const std::string log = server.Log();
  for (const auto& [model, records] : {std::pair{"saved", 2}, std::pair{"bundle", 1}, std::pair{"onnx", 1}}) {
    const std::string replayed = "event=warmup_replayed model=" + std::string(model) + " version=1 records=" +
                                 std::to_string(records) + " runs=" + std::to_string(3 * records) + " ";
    ASSERT_NE(log.find(replayed), std::string::npos) << replayed << "\n" << log;
    EXPECT_LT(log.find(replayed), log.find("event=version_available model=" + std::string(model) + " version=1 "))
        << log;
  }
  HttpClient http(server.rest_port());
  EXPECT_EQ(http.Post("/v1/models/saved:predict", R"({"instances": [1.0]})").body, R"({"predictions": [2.5]})");

  // Version 2's warm-up asks for a signature it lacks: it never serves, version 1 goes on, and
  // its status says which record failed.
  const fs::path staged = dir.path() / "staged";
  CopyHalfPlusTwo(staged);
  WriteWarmupFile(staged, {PredictLog({1}, 1), PredictLog({1}, 1, "no_such_signature")});
  fs::rename(staged, models / "saved" / "2");
  std::string status;
  ASSERT_TRUE(WaitFor([&] {
    status = http.Get("/v1/models/saved").body;
    return status.find("warm-up record 1 (at byte ") != std::string::npos;
  })) << status << server.Log();
  EXPECT_NE(status.find("not found in signature def"), std::string::npos) << status;
  const HttpResult still = http.Post("/v1/models/saved:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(still.status, 200) << still.body;
  EXPECT_EQ(HeaderOf(still, "x-model-version"), "1");
}

TEST(WarmupFileTest, DisabledWarmupLoadsWithoutReplaying) {
  ScratchDir dir;
  const fs::path base = dir.path() / "saved";
  CopyHalfPlusTwo(base / "1");
  WriteWarmupFile(base / "1", {PredictLog({1}, 1, "no_such_signature")});
  ServerProcess server(dir.path(), {"--model_name=saved", "--model_base_path=" + base.string(),
                                    "--enable_model_warmup=false"});
  EXPECT_EQ(server.Log().find("event=warmup_replayed"), std::string::npos) << server.Log();
  HttpClient http(server.rest_port());
  EXPECT_EQ(http.Post("/v1/models/saved:predict", R"({"instances": [2.0]})").body, R"({"predictions": [3.0]})");
}

}  // namespace
}  // namespace lockstep::e2e
