// TensorFlow Serving's README conversation, over REST and over gRPC, against the real binary.
#include <gtest/gtest.h>

#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

class HalfPlusTwoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteHalfPlusTwo(dir_ / "half_plus_two", 1);
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--model_name=half_plus_two",
                                              "--model_base_path=" + (dir_ / "half_plus_two").string()});
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(HalfPlusTwoTest, RestPredict) {
  HttpClient http(server_->rest_port());
  const HttpResult r = http.Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0, 5.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
  EXPECT_EQ(r.headers.at("x-model-version"), "1");
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
}

TEST_F(HalfPlusTwoTest, GrpcPredict) {
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("half_plus_two");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(3);
  for (float v : {1.0f, 2.0f, 5.0f}) x.add_float_val(v);
  tfs::PredictResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const tensorflow::TensorProto& y = response.outputs().at("y");
  EXPECT_EQ(y.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(y.tensor_shape().dim_size(), 1);
  EXPECT_EQ(y.tensor_shape().dim(0).size(), 3);
  ASSERT_EQ(y.float_val_size(), 3);
  EXPECT_EQ(y.float_val(0), 2.5f);
  EXPECT_EQ(y.float_val(1), 3.0f);
  EXPECT_EQ(y.float_val(2), 4.5f);
  EXPECT_EQ(response.model_spec().name(), "half_plus_two");
  EXPECT_EQ(response.model_spec().version().value(), 1);
  EXPECT_EQ(response.model_spec().signature_name(), "serving_default");
}

TEST_F(HalfPlusTwoTest, StopsCleanlyOnSigterm) {
  EXPECT_EQ(server_->Stop(), 0) << server_->Log();
  EXPECT_NE(server_->Log().find("event=stopped"), std::string::npos) << server_->Log();
}

}  // namespace
}  // namespace lockstep::e2e
