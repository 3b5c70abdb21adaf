// Lockstep's promise, end to end: model-train trains the digits model and exports it; the real
// model-server serves the bundle; over REST and over gRPC it answers, for every test row,
// exactly the probabilities model-train's own evaluation computed (bit-identical floats).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

std::vector<std::vector<float>> FloatRows(const nlohmann::json& rows) {
  std::vector<std::vector<float>> out;
  for (const auto& row : rows) {
    std::vector<float> r;
    for (const auto& bits : row) r.push_back(std::bit_cast<float>(bits.get<uint32_t>()));
    out.push_back(std::move(r));
  }
  return out;
}

TEST(TrainingParityTest, ServedProbabilitiesAreTheTrainersBitForBit) {
  ScratchDir dir;
  const fs::path models = dir / "digits";
  const fs::path predictions = dir / "predictions.json";
  // The repository's digits config, with the data path made absolute (model-train takes
  // relative paths from its working directory, and the test runs elsewhere).
  std::string config = ReadFile(fs::path(LOCKSTEP_SOURCE_DIR) / "config/train/digits.json");
  const std::string data = "examples/data/digits.csv";
  config.replace(config.find(data), data.size(), std::string(LOCKSTEP_SOURCE_DIR) + "/" + data);
  const fs::path config_path = dir / "digits.json";
  std::ofstream(config_path) << config;
  const pid_t trainer = Spawn({MODEL_TRAIN_PATH, "--config", config_path.string(), "--epochs", "3",
                               "--export_dir", models.string(), "--predictions_out", predictions.string()},
                              dir / "model-train.log");
  int status = 0;
  ASSERT_EQ(waitpid(trainer, &status, 0), trainer);
  const std::string train_log = ReadFile(dir / "model-train.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << train_log;
  const nlohmann::json expected = nlohmann::json::parse(ReadFile(predictions));
  const auto features = FloatRows(expected["features"]);
  const auto probabilities = FloatRows(expected["probabilities"]);
  ASSERT_EQ(features.size(), 359u) << "the digits test split: 20 % of each class, rounded";

  ServerProcess server(dir.path(), {"--model_name=digits", "--model_base_path=" + models.string()});

  // REST: every test row in one request, in the row format clients use.
  nlohmann::json instances = nlohmann::json::array();
  for (const auto& row : features) instances.push_back(row);
  HttpClient http(server.rest_port());
  const HttpResult r =
      http.Post("/v1/models/digits:predict", nlohmann::json{{"instances", instances}}.dump());
  ASSERT_EQ(r.status, 200) << r.error << r.body.substr(0, 500);
  const nlohmann::json body = nlohmann::json::parse(r.body);
  ASSERT_EQ(body["predictions"].size(), features.size());
  for (size_t i = 0; i < features.size(); ++i) {
    const auto& served = body["predictions"][i]["probabilities"];
    ASSERT_EQ(served.size(), probabilities[i].size());
    for (size_t j = 0; j < served.size(); ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(served[j].get<float>()), std::bit_cast<uint32_t>(probabilities[i][j]))
          << "REST row " << i << " class " << j;
    }
  }

  // gRPC: the same rows as one [360, 64] tensor.
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("digits");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(features.size()));
  x.mutable_tensor_shape()->add_dim()->set_size(64);
  for (const auto& row : features) {
    for (float v : row) x.add_float_val(v);
  }
  tfs::PredictResponse response;
  grpc::ClientContext context;
  const grpc::Status s = stub->Predict(&context, request, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  const tensorflow::TensorProto& served = response.outputs().at("probabilities");
  ASSERT_EQ(served.float_val_size(), static_cast<int>(features.size() * 10));
  for (size_t i = 0; i < features.size(); ++i) {
    for (size_t j = 0; j < 10; ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(served.float_val(static_cast<int>(i * 10 + j))),
                std::bit_cast<uint32_t>(probabilities[i][j]))
          << "gRPC row " << i << " class " << j;
    }
  }
}

}  // namespace
}  // namespace lockstep::e2e
