// Shared by the gRPC end-to-end tests (grpc_*_test.cc): tensor, request and config helpers,
// and GrpcApiTest, the fixture of the one shared read-only server.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {

namespace tfs = tensorflow::serving;

// A float vector x of shape [n] in float_val.
inline tensorflow::TensorProto FloatTensor(const std::vector<float>& values) {
  tensorflow::TensorProto tensor;
  tensor.set_dtype(tensorflow::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  for (float v : values) tensor.add_float_val(v);
  return tensor;
}

// A tensor's floats, whichever encoding it came in.
inline std::vector<float> FloatsOf(const tensorflow::TensorProto& tensor) {
  if (!tensor.tensor_content().empty()) {
    std::vector<float> out(tensor.tensor_content().size() / sizeof(float));
    std::memcpy(out.data(), tensor.tensor_content().data(), out.size() * sizeof(float));
    return out;
  }
  return {tensor.float_val().begin(), tensor.float_val().end()};
}

inline tfs::PredictRequest PredictX(const std::string& model, const std::vector<float>& x) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  (*request.mutable_inputs())["x"] = FloatTensor(x);
  return request;
}

// A text ModelServerConfig for `models`: (name, base_path, extra text inside the config block).
struct ConfigEntry {
  std::string name;
  fs::path base_path;
  std::string extra;
};
inline std::string ConfigText(const std::vector<ConfigEntry>& models) {
  std::string text = "model_config_list {\n";
  for (const ConfigEntry& m : models) {
    text += "  config {\n    name: \"" + m.name + "\"\n    base_path: \"" + m.base_path.string() +
            "\"\n    model_platform: \"tensorflow\"\n    " + m.extra + "\n  }\n";
  }
  return text + "}\n";
}

// The gRPC status as "CODE: message" for failure output.
inline std::string Describe(const grpc::Status& status) {
  return std::to_string(static_cast<int>(status.error_code())) + ": " + status.error_message();
}

// One server for the read-only tests: half_plus_two (version 1, three signatures) and
// "versions" (y = v * x for versions 1 and 2, all served, labels stable=1 and canary=2).
class GrpcApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    WriteHalfPlusTwo(*dir_ / "half_plus_two", 1);
    WriteVersionModel(*dir_ / "versions", 1);
    WriteVersionModel(*dir_ / "versions", 2);
    const fs::path config = *dir_ / "models.config";
    WriteFile(config, ConfigText({{"half_plus_two", *dir_ / "half_plus_two", ""},
                                  {"versions", *dir_ / "versions",
                                   "model_version_policy { all {} }\n"
                                   "    version_labels { key: \"stable\" value: 1 }\n"
                                   "    version_labels { key: \"canary\" value: 2 }"}}));
    server_ = new ServerProcess(dir_->path(), {"--model_config_file=" + config.string()});
    channel_ = new std::shared_ptr<grpc::Channel>(MakeChannel(server_->grpc_target()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;
    delete dir_;
  }

  std::unique_ptr<tfs::PredictionService::Stub> Prediction() { return tfs::PredictionService::NewStub(*channel_); }
  std::unique_ptr<tfs::ModelService::Stub> Models() { return tfs::ModelService::NewStub(*channel_); }

  grpc::Status Predict(const tfs::PredictRequest& request, tfs::PredictResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return Prediction()->Predict(&context, request, response);
  }

  // Predict that is expected to fail: its status.
  grpc::Status PredictError(const tfs::PredictRequest& request) {
    tfs::PredictResponse response;
    return Predict(request, &response);
  }

  // The y a "versions" request answers for x = 1: the version that served it.
  float VersionAnswer(const tfs::ModelSpec& spec, int64_t* served_version = nullptr) {
    tfs::PredictRequest request = PredictX("versions", {1.0f});
    *request.mutable_model_spec() = spec;
    tfs::PredictResponse response;
    const grpc::Status status = Predict(request, &response);
    EXPECT_TRUE(status.ok()) << Describe(status);
    if (served_version != nullptr) *served_version = response.model_spec().version().value();
    const std::vector<float> y = FloatsOf(response.outputs().at("y"));
    return y.empty() ? -1.0f : y[0];
  }

  grpc::Status GetStatus(const tfs::ModelSpec& spec, tfs::GetModelStatusResponse* response) {
    tfs::GetModelStatusRequest request;
    *request.mutable_model_spec() = spec;
    grpc::ClientContext context;
    return Models()->GetModelStatus(&context, request, response);
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel>* channel_ = nullptr;
};

}  // namespace lockstep::e2e
