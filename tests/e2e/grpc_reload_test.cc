// ModelService.HandleReloadConfigRequest end to end: good and bad configs, added and removed
// models, over gRPC against the real binary (each test its own server: they change it).
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tensorflow_serving/config/model_server_config.pb.h"
#include "tests/e2e/grpc_test_util.h"

namespace lockstep::e2e {
namespace {

// ---- ModelService.HandleReloadConfigRequest (each test its own server: they change it) ----

class GrpcReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteHalfPlusTwo(dir_ / "half_plus_two", 1);
    WriteVersionModel(dir_ / "second", 7);
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--model_name=half_plus_two",
                                              "--model_base_path=" + (dir_ / "half_plus_two").string()});
    channel_ = MakeChannel(server_->grpc_target());
  }

  tfs::ModelServerConfig ParseConfig(const std::string& text) {
    tfs::ModelServerConfig config;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
    return config;
  }

  grpc::Status Reload(const tfs::ModelServerConfig& config, tfs::ReloadConfigResponse* response) {
    tfs::ReloadConfigRequest request;
    *request.mutable_config() = config;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return tfs::ModelService::NewStub(channel_)->HandleReloadConfigRequest(&context, request, response);
  }

  // Predict x = 1 on `model`: y, or the failed status.
  grpc::Status PredictOne(const std::string& model, float* y) {
    tfs::PredictResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status =
        tfs::PredictionService::NewStub(channel_)->Predict(&context, PredictX(model, {1.0f}), &response);
    if (status.ok()) *y = FloatsOf(response.outputs().at("y")).at(0);
    return status;
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcReloadTest, GoodConfigAddsAModel) {
  const tfs::ModelServerConfig config = ParseConfig(ConfigText(
      {{"half_plus_two", dir_ / "half_plus_two", ""}, {"second", dir_ / "second", ""}}));
  tfs::ReloadConfigResponse response;
  const grpc::Status status = Reload(config, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(response.status().error_code(), tensorflow::error::OK);
  EXPECT_EQ(response.status().error_message(), "");

  // As in TF Serving, the reload answers once the models it adds are available: the new
  // model serves at once, and the old one never stopped.
  float y = 0.0f;
  grpc::Status predicted = PredictOne("second", &y);
  ASSERT_TRUE(predicted.ok()) << Describe(predicted);
  EXPECT_EQ(y, 7.0f);
  predicted = PredictOne("half_plus_two", &y);
  ASSERT_TRUE(predicted.ok()) << Describe(predicted);
  EXPECT_EQ(y, 2.5f);
  EXPECT_NE(server_->Log().find("event=config_applied models=half_plus_two,second"), std::string::npos)
      << server_->Log();
}

TEST_F(GrpcReloadTest, AddedModelWithNothingToServeIsReportedButApplied) {
  fs::create_directories(dir_ / "empty");
  const tfs::ModelServerConfig config = ParseConfig(ConfigText(
      {{"half_plus_two", dir_ / "half_plus_two", ""}, {"empty", dir_ / "empty", ""}}));
  tfs::ReloadConfigResponse response;
  const grpc::Status status = Reload(config, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN) << Describe(status);
  EXPECT_NE(status.error_message().find("no version available"), std::string::npos) << Describe(status);
  EXPECT_NE(status.error_message().find("empty"), std::string::npos) << Describe(status);
  // Applied all the same: the old model still serves, and a version exported later is served.
  float y = 0.0f;
  ASSERT_TRUE(PredictOne("half_plus_two", &y).ok());
  EXPECT_EQ(y, 2.5f);
  EXPECT_NE(server_->Log().find("event=config_applied models=half_plus_two,empty"), std::string::npos)
      << server_->Log();
}

TEST_F(GrpcReloadTest, ConfigWithoutAModelUnloadsIt) {
  const tfs::ModelServerConfig config = ParseConfig(ConfigText({{"second", dir_ / "second", ""}}));
  tfs::ReloadConfigResponse response;
  const grpc::Status status = Reload(config, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  float y = 0.0f;
  const grpc::Status gone = PredictOne("half_plus_two", &y);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(gone.error_message(), "Servable not found for request: Latest(half_plus_two)");
  const grpc::Status second = PredictOne("second", &y);
  ASSERT_TRUE(second.ok()) << Describe(second);
  EXPECT_EQ(y, 7.0f);
}

TEST_F(GrpcReloadTest, BadConfigIsRefusedAndTheOldOneKeepsServing) {
  struct Case {
    std::string what;
    std::string text;
    grpc::StatusCode code;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {"relative base_path", ConfigText({{"half_plus_two", "relative/half_plus_two", ""}}),
       grpc::StatusCode::INVALID_ARGUMENT, "base_path 'relative/half_plus_two' is not an absolute path"},
      {"unsupported platform",
       "model_config_list { config { name: \"half_plus_two\" base_path: \"" + (dir_ / "half_plus_two").string() +
           "\" model_platform: \"pytorch\" } }",
       grpc::StatusCode::INVALID_ARGUMENT, "model_platform 'pytorch' is not supported"},
      {"label on a version that does not exist",
       ConfigText({{"half_plus_two", dir_ / "half_plus_two", "version_labels { key: \"stable\" value: 9 }"}}),
       grpc::StatusCode::FAILED_PRECONDITION, "Request to assign label to version 9 of model half_plus_two"},
      // Neither model_config_list nor custom_model_config: TF Serving refuses the transition
      // (an empty list, "model_config_list {}", is how to unload everything).
      {"no config at all", "", grpc::StatusCode::FAILED_PRECONDITION,
       "It is only legal to transition from one ModelConfigList to another."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    tfs::ReloadConfigResponse response;
    const grpc::Status status = Reload(ParseConfig(c.text), &response);
    EXPECT_EQ(status.error_code(), c.code) << Describe(status);
    EXPECT_NE(status.error_message().find(c.message_part), std::string::npos) << status.error_message();
    // The server fills response.status with the same code and message (as TF Serving does),
    // but gRPC sends no response message with a non-OK status: the client sees an empty one.
    // The mirror is visible on success only (GoodConfigAddsAModel).
    EXPECT_EQ(response.status().error_code(), tensorflow::error::OK);
    float y = 0.0f;
    const grpc::Status still = PredictOne("half_plus_two", &y);
    ASSERT_TRUE(still.ok()) << Describe(still);
    EXPECT_EQ(y, 2.5f);
  }
}

TEST_F(GrpcReloadTest, CustomModelConfigIsUnimplemented) {
  tfs::ModelServerConfig config;
  config.mutable_custom_model_config();
  tfs::ReloadConfigResponse response;
  const grpc::Status status = Reload(config, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(status);
  EXPECT_EQ(status.error_message(), "custom_model_config is not supported; use model_config_list");
  float y = 0.0f;
  EXPECT_TRUE(PredictOne("half_plus_two", &y).ok());
}

}  // namespace
}  // namespace lockstep::e2e
