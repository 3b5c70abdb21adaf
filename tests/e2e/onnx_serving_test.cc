// An ONNX model as torch.onnx.export writes it, served unchanged by the real binary: REST and
// gRPC predict under the model's own input and output names, metadata, and a broken version
// that must not replace the one serving.
#include <gtest/gtest.h>

#include "tests/e2e/rest_test_util.h"
#include "tests/runtime/onnx_test_util.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;
using testing_onnx::MakeMlp;
using testing_onnx::MlpReference;

class OnnxServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = dir_.path() / "models" / "mlp";
    MakeMlp().Write(base_ / "1");
    // model_platform "onnx" in a config file, as a Triton or KServe user would name it.
    const fs::path config = dir_.path() / "models.config";
    // The same files again as a second model served on the bf16 matmul core, and as a third
    // computing on one thread of its own.
    std::ofstream(config) << "model_config_list { config { name: \"mlp\" base_path: \"" << base_.string()
                          << "\" model_platform: \"onnx\" } config { name: \"mlp_bf16\" base_path: \""
                          << base_.string() << "\" matmul_precision: \"bfloat16\" } config { name: \"mlp_1\" base_path: \""
                          << base_.string() << "\" intra_op_parallelism: 1 } }\n";
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--model_config_file=" + config.string(),
                                              "--file_system_poll_wait_seconds=1"});
  }
  HttpResult Post(const std::string& target, const std::string& body) {
    return HttpClient(server_->rest_port()).Post(target, body);
  }

  ScratchDir dir_;
  fs::path base_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(OnnxServingTest, PredictOverRestAndGrpcUnderTheModelsOwnNames) {
  HttpResult r = Post("/v1/models/mlp:predict", R"({"instances": [[1, 2, 3, 4], [-1, 0.5, 2, -3]]})");
  ASSERT_EQ(r.status, 200) << r.body << server_->Log();
  const json body = ParseBody(r);
  ASSERT_EQ(body["predictions"].size(), 2u) << r.body;
  const std::vector<double> first = MlpReference({1, 2, 3, 4}), second = MlpReference({-1, 0.5f, 2, -3});
  EXPECT_NEAR(body["predictions"][0][0].get<double>(), first[0], 1e-6) << r.body;
  EXPECT_NEAR(body["predictions"][1][1].get<double>(), second[1], 1e-6) << r.body;

  // Columnar form, named input.
  r = Post("/v1/models/mlp:predict", R"({"inputs": {"x": [[1, 2, 3, 4]]}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NEAR(ParseBody(r)["outputs"][0][0].get<double>(), first[0], 1e-6) << r.body;

  // A row of the wrong width: 400 naming the input, and the server goes on.
  r = Post("/v1/models/mlp:predict", R"({"instances": [[1, 2, 3]]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(Contains(ErrorOf(r), "'x'")) << r.body;

  r = HttpClient(server_->rest_port()).Get("/v1/models/mlp/metadata");
  ASSERT_EQ(r.status, 200) << r.body;
  const json meta = ParseBody(r);
  const json& def = meta["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_TRUE(def["inputs"].contains("x")) << r.body;
  EXPECT_TRUE(def["outputs"].contains("probabilities")) << r.body;

  auto stub = tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("mlp");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.mutable_tensor_shape()->add_dim()->set_size(4);
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) x.add_float_val(v);
  tfs::PredictResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const tensorflow::TensorProto& p = response.outputs().at("probabilities");
  ASSERT_EQ(p.float_val_size(), 2);
  EXPECT_NEAR(p.float_val(0), first[0], 1e-6);
  EXPECT_EQ(response.model_spec().version().value(), 1);
}

// The Open Inference Protocol on the same model: metadata names the ONNX platform and the
// model's own tensors, and infer answers what predict answers, bit for bit.
TEST_F(OnnxServingTest, OpenInferenceProtocolAnswersAsPredictDoes) {
  HttpResult r = HttpClient(server_->rest_port()).Get("/v2/models/mlp");
  ASSERT_EQ(r.status, 200) << r.body;
  const json meta = ParseBody(r);
  EXPECT_EQ(meta["platform"], "onnxruntime_onnx");
  EXPECT_EQ(meta["inputs"], json::parse(R"([{"name": "x", "datatype": "FP32", "shape": [-1, 4]}])"));
  r = Post("/v2/models/mlp/infer",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [[1, 2, 3, 4], [-1, 0.5, 2, -3]]}],
               "outputs": [{"name": "probabilities"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json v2 = ParseBody(r)["outputs"][0];
  EXPECT_EQ(v2["shape"], json({2, 2}));
  const json predict = ParseBody(Post("/v1/models/mlp:predict", R"({"instances": [[1, 2, 3, 4], [-1, 0.5, 2, -3]]})"));
  json flat = json::array();
  for (const json& row : predict["predictions"]) flat.insert(flat.end(), row.begin(), row.end());
  EXPECT_EQ(v2["data"], flat);
}

// matmul_precision "bfloat16": the model's products take bf16-rounded operands, so it answers
// as the bf16 reference does and not as float32 does (the input and weights are not bf16
// numbers).
TEST_F(OnnxServingTest, AModelServedOnTheBf16MatmulCore) {
  const std::vector<float> x{1.1f, 2.3f, -0.7f, 0.9f};
  const std::string body = R"({"instances": [[1.1, 2.3, -0.7, 0.9]]})";
  HttpResult r = Post("/v1/models/mlp:predict", body);
  ASSERT_EQ(r.status, 200) << r.body << server_->Log();
  const double float32 = ParseBody(r)["predictions"][0][0].get<double>();
  EXPECT_NEAR(float32, MlpReference(x)[0], 1e-6);
  r = Post("/v1/models/mlp_bf16:predict", body);
  ASSERT_EQ(r.status, 200) << r.body << server_->Log();
  const double bf16 = ParseBody(r)["predictions"][0][0].get<double>();
  EXPECT_NEAR(bf16, MlpReference(x, true)[0], 1e-6);
  EXPECT_GT(std::fabs(bf16 - float32), 1e-4) << "bf16 " << bf16 << " float32 " << float32;
}

// intra_op_parallelism 1: the version computes on a pool of its own (the request's thread
// alone), which the server logs; the answer is the same bits as on the shared pool.
TEST_F(OnnxServingTest, AModelOnThreadsOfItsOwnAnswersTheSame) {
  const std::string body = R"({"instances": [[1.1, 2.3, -0.7, 0.9], [0.5, -1.5, 2.5, 0.25]]})";
  HttpResult shared = Post("/v1/models/mlp:predict", body);
  ASSERT_EQ(shared.status, 200) << shared.body << server_->Log();
  ASSERT_TRUE(WaitFor([&] { return Post("/v1/models/mlp_1:predict", body).status == 200; })) << server_->Log();
  HttpResult own = Post("/v1/models/mlp_1:predict", body);
  EXPECT_EQ(ParseBody(own)["predictions"], ParseBody(shared)["predictions"]);
  const std::string log = server_->Log();
  const size_t at = log.find("model=mlp_1 version=1 load_s=");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.substr(at, log.find('\n', at) - at).find("intra_op_threads=1"), std::string::npos) << log;
}

TEST_F(OnnxServingTest, ABrokenVersionNeverReplacesTheOneServing) {
  ASSERT_EQ(Post("/v1/models/mlp:predict", R"({"instances": [[1, 2, 3, 4]]})").status, 200) << server_->Log();
  // Version 2: an op outside the table; version 3: a truncated file. Each staged beside the
  // base path and renamed in, as a deployment would.
  testing_onnx::OnnxModelBuilder unsupported;
  unsupported.Input("x", {-1, 4});
  unsupported.Output("probabilities", {-1, 4});
  unsupported.Node("Bernoulli", {"x"}, {"probabilities"}, "the_bernoulli");  // random: never served
  const std::string whole = MakeMlp().Serialized();
  struct Broken {
    const char* version;
    std::string bytes;
    const char* logged;
  } broken[] = {{"2", unsupported.Serialized(), "the_bernoulli"}, {"3", whole.substr(0, whole.size() / 3), "model.onnx"}};
  for (const Broken& b : broken) {
    const fs::path staged = dir_.path() / ("staged_" + std::string(b.version));
    fs::create_directories(staged);
    std::ofstream(staged / "model.onnx", std::ios::binary) << b.bytes;
    fs::rename(staged, base_ / b.version);
    ASSERT_TRUE(WaitFor([&] {
      const std::string log = server_->Log();
      return log.find("version " + std::string(b.version)) != std::string::npos && log.find(b.logged) != std::string::npos;
    })) << server_->Log();
    for (int i = 0; i < 10; ++i) {
      const HttpResult r = Post("/v1/models/mlp:predict", R"({"instances": [[1, 2, 3, 4]]})");
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(HeaderOf(r, "x-model-version"), "1");
    }
  }
}

}  // namespace
}  // namespace lockstep::e2e
