// TensorFlow Serving's own SavedModels (tests/data/tf_saved_models/), served unchanged by the
// real binary and asked what TF Serving is asked: predict, classify and regress on tf.Examples,
// metadata, version selection, over REST and gRPC; and a damaged version that must not load
// while the version before it keeps serving.
#include <gtest/gtest.h>

#include <cstring>

#include "inference/grpc_service.grpc.pb.h"
#include "runtime/base64.h"
#include "tensorflow/core/example/example.pb.h"
#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

const fs::path kData = fs::path(LOCKSTEP_SOURCE_DIR) / "tests/data/tf_saved_models";

tensorflow::Example ExampleOf(std::initializer_list<std::pair<const char*, float>> features) {
  tensorflow::Example e;
  for (const auto& [key, value] : features)
    (*e.mutable_features()->mutable_feature())[key].mutable_float_list()->add_value(value);
  return e;
}

// One server for the model at `base` (a directory of TF Serving's test data, unchanged).
class SavedModelServingTest : public ::testing::Test {
 protected:
  void Serve(const fs::path& base, std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--model_name=m", "--model_base_path=" + base.string(),
                                      "--file_system_poll_wait_seconds=1"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ServerProcess>(dir_.path(), flags);
  }
  HttpResult Post(const std::string& target, const std::string& body) {
    return HttpClient(server_->rest_port()).Post(target, body);
  }
  std::unique_ptr<tfs::PredictionService::Stub> Stub() {
    return tfs::PredictionService::NewStub(MakeChannel(server_->grpc_target()));
  }

  ScratchDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(SavedModelServingTest, Tf1HalfPlusTwoOverRest) {
  Serve(kData / "saved_model_half_plus_two_cpu");
  HttpResult r = Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 5.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
  EXPECT_EQ(HeaderOf(r, "x-model-version"), "123");

  // classify_x_to_y and regress_x_to_y parse the examples in the graph; the context fills in
  // what an example lacks, and an example's own feature wins over it.
  r = Post("/v1/models/m:classify",
           R"({"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [[["", 2.5]], [["", 3.0]]]})");
  r = Post("/v1/models/m:regress",
           R"({"signature_name": "regress_x_to_y", "context": {"x": 4.0}, "examples": [{}, {"x": 5.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [4.0, 4.5]})");
  r = Post("/v1/models/m:regress", R"({"signature_name": "regress_x_to_y2", "examples": [{"x": 1.0}]})");
  EXPECT_EQ(r.body, R"({"results": [3.5]})");

  // An example without the feature the graph needs: 400 naming it, and the server goes on.
  r = Post("/v1/models/m:regress", R"({"signature_name": "regress_x_to_y", "examples": [{"y": 1.0}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(Contains(ErrorOf(r), "feature 'x'")) << r.body;
  // A predict signature is not a regression signature, as TF Serving answers.
  r = Post("/v1/models/m:regress", R"({"examples": [{"x": 1.0}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(Contains(ErrorOf(r), "Expected regression signature method_name")) << r.body;

  // Metadata: the SavedModel's own SignatureDefs, TensorFlow's tensor names included.
  r = HttpClient(server_->rest_port()).Get("/v1/models/m/metadata");
  ASSERT_EQ(r.status, 200) << r.body;
  const json meta = ParseBody(r);
  const json& defs = meta["metadata"]["signature_def"]["signature_def"];
  EXPECT_EQ(defs.size(), 5u) << r.body;
  EXPECT_EQ(defs["classify_x_to_y"]["inputs"]["inputs"]["name"], "tf_example:0") << r.body;
  EXPECT_EQ(defs["classify_x_to_y"]["inputs"]["inputs"]["tensor_shape"]["unknown_rank"], true) << r.body;
  EXPECT_EQ(defs["classify_x_to_y"]["method_name"], "tensorflow/serving/classify");
  EXPECT_EQ(defs["serving_default"]["outputs"]["y"]["name"], "y:0");
  EXPECT_EQ(meta["model_spec"]["version"], "123");
}

TEST_F(SavedModelServingTest, Tf1HalfPlusTwoOverGrpc) {
  Serve(kData / "saved_model_half_plus_two_cpu");
  auto stub = Stub();

  tfs::ClassificationRequest classify;
  classify.mutable_model_spec()->set_name("m");
  classify.mutable_model_spec()->set_signature_name("classify_x_to_y");
  auto* with_context = classify.mutable_input()->mutable_example_list_with_context();
  *with_context->mutable_context() = ExampleOf({{"x", 10.0f}});
  *with_context->add_examples() = ExampleOf({{"x", 1.0f}});
  *with_context->add_examples() = ExampleOf({});
  tfs::ClassificationResponse classified;
  grpc::ClientContext c1;
  grpc::Status status = stub->Classify(&c1, classify, &classified);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(classified.result().classifications_size(), 2);
  EXPECT_EQ(classified.result().classifications(0).classes(0).score(), 2.5f);
  EXPECT_EQ(classified.result().classifications(1).classes(0).score(), 7.0f);  // the context's x
  EXPECT_EQ(classified.model_spec().version().value(), 123);

  tfs::RegressionRequest regress;
  regress.mutable_model_spec()->set_name("m");
  regress.mutable_model_spec()->set_signature_name("regress_x_to_y2");
  *regress.mutable_input()->mutable_example_list()->add_examples() = ExampleOf({{"x", 5.0f}});
  tfs::RegressionResponse regressed;
  grpc::ClientContext c2;
  status = stub->Regress(&c2, regress, &regressed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(regressed.result().regressions_size(), 1);
  EXPECT_EQ(regressed.result().regressions(0).value(), 5.5f);

  // A malformed feature: INVALID_ARGUMENT naming it.
  regress.mutable_input()->mutable_example_list()->clear_examples();
  tensorflow::Example two_values = ExampleOf({{"x", 1.0f}});
  (*two_values.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(2.0f);
  *regress.mutable_input()->mutable_example_list()->add_examples() = two_values;
  grpc::ClientContext c3;
  status = stub->Regress(&c3, regress, &regressed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("2 values, expected 1"), std::string::npos) << status.error_message();

  tfs::PredictRequest predict = PredictX("m");
  tfs::PredictResponse predicted;
  grpc::ClientContext c4;
  status = stub->Predict(&c4, predict, &predicted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(predicted.outputs().at("y").float_val(0), 2.5f);

  tfs::GetModelMetadataRequest meta_request;
  meta_request.mutable_model_spec()->set_name("m");
  meta_request.add_metadata_field("signature_def");
  tfs::GetModelMetadataResponse meta;
  grpc::ClientContext c5;
  status = stub->GetModelMetadata(&c5, meta_request, &meta);
  ASSERT_TRUE(status.ok()) << status.error_message();
  tfs::SignatureDefMap defs;
  ASSERT_TRUE(meta.metadata().at("signature_def").UnpackTo(&defs));
  EXPECT_EQ(defs.signature_def().at("regress_x_to_y").inputs().at("inputs").name(), "tf_example:0");
}

TEST_F(SavedModelServingTest, Tf2HalfPlusTwoOverRestAndGrpc) {
  Serve(kData / "saved_model_half_plus_two_tf2_cpu");
  HttpResult r = Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 5.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");

  // Its classify signature is a predict signature over serialized examples (ParseExampleV2),
  // so a client sends the examples' bytes in base64.
  const std::string b64 = Base64Encode(ExampleOf({{"x", 5.0f}}).SerializeAsString());
  r = Post("/v1/models/m:predict",
           R"({"signature_name": "classify_x_to_y", "instances": [{"b64": ")" + b64 + R"("}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [[4.5]]})");

  r = HttpClient(server_->rest_port()).Get("/v1/models/m/metadata");
  const json meta = ParseBody(r);
  EXPECT_TRUE(meta["metadata"]["signature_def"]["signature_def"].contains("__saved_model_init_op")) << r.body;

  auto stub = Stub();
  tfs::PredictRequest predict = PredictX("m", 4.0f);
  tfs::PredictResponse predicted;
  grpc::ClientContext context;
  const grpc::Status status = stub->Predict(&context, predict, &predicted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(predicted.outputs().at("y").float_val(0), 4.0f);
}

// The Open Inference Protocol on TF Serving's own SavedModel: the SavedModel's platform and
// signature in metadata, and infer answers as predict does, over REST and gRPC.
TEST_F(SavedModelServingTest, Tf1HalfPlusTwoOverTheOpenInferenceProtocol) {
  Serve(kData / "saved_model_half_plus_two_cpu");
  HttpResult r = HttpClient(server_->rest_port()).Get("/v2/models/m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ParseBody(r)["platform"], "tensorflow_savedmodel");
  EXPECT_EQ(ParseBody(r)["versions"], json({"123"}));
  r = Post("/v2/models/m/infer",
           R"({"id": "a", "inputs": [{"name": "x", "datatype": "FP32", "shape": [3], "data": [1.0, 2.0, 5.0]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ParseBody(r), json::parse(R"({"model_name": "m", "model_version": "123", "id": "a",
      "outputs": [{"name": "y", "datatype": "FP32", "shape": [3], "data": [2.5, 3.0, 4.5]}]})"));
  // regress_x_to_y takes serialized tf.Examples, bytes that are not UTF-8: BYTES sent binary.
  const std::string example = ExampleOf({{"x", 4.0f}}).SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(example.size());
  const std::string raw = std::string(reinterpret_cast<const char*>(&length), 4) + example;
  const std::string header =
      json({{"parameters", {{"signature_name", "regress_x_to_y"}}},
            {"inputs", {{{"name", "inputs"}, {"datatype", "BYTES"}, {"shape", {1}},
                         {"parameters", {{"binary_data_size", raw.size()}}}}}}})
          .dump();
  r = HttpClient(server_->rest_port())
          .Request("POST", "/v2/models/m/infer", header + raw,
                   {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ParseBody(r)["outputs"][0]["data"], json({4.0}));

  auto stub = inference::GRPCInferenceService::NewStub(MakeChannel(server_->grpc_target()));
  inference::ModelInferRequest request;
  request.set_model_name("m");
  request.set_model_version("123");
  auto* x = request.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(2);
  x->mutable_contents()->add_fp32_contents(1.0f);
  x->mutable_contents()->add_fp32_contents(5.0f);
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  const grpc::Status status = stub->ModelInfer(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  float y[2];
  ASSERT_EQ(response.raw_output_contents(0).size(), sizeof(y));
  std::memcpy(y, response.raw_output_contents(0).data(), sizeof(y));
  EXPECT_EQ(y[0], 2.5f);
  EXPECT_EQ(y[1], 4.5f);
}

TEST_F(SavedModelServingTest, HalfPlusThree) {
  Serve(kData / "saved_model_half_plus_three");
  const HttpResult r = Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 5.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [3.5, 4.0, 5.5]})");
}

TEST_F(SavedModelServingTest, VersionSelectionBetween123And124) {
  const fs::path config = dir_ / "models.config";
  WriteFile(config, "model_config_list { config { name: 'm' base_path: '" +
                        (kData / "saved_model_half_plus_two_2_versions").string() +
                        "' model_platform: 'tensorflow' model_version_policy { all {} } } }");
  server_ = std::make_unique<ServerProcess>(dir_.path(), std::vector<std::string>{"--model_config_file=" + config.string()});
  ASSERT_TRUE(WaitFor([&] {
    return Post("/v1/models/m/versions/123:predict", R"({"instances": [1.0]})").status == 200 &&
           Post("/v1/models/m/versions/124:predict", R"({"instances": [1.0]})").status == 200;
  })) << server_->Log();
  for (const char* version : {"123", "124"}) {
    const HttpResult r =
        Post(std::string("/v1/models/m/versions/") + version + ":predict", R"({"instances": [1.0, 2.0, 5.0]})");
    EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})") << version;
    EXPECT_EQ(HeaderOf(r, "x-model-version"), version);
  }
  // No version named: the latest.
  EXPECT_EQ(HeaderOf(Post("/v1/models/m:predict", R"({"instances": [1.0]})"), "x-model-version"), "124");

  auto stub = Stub();
  tfs::PredictRequest predict = PredictX("m", 2.0f);
  predict.mutable_model_spec()->mutable_version()->set_value(123);
  tfs::PredictResponse predicted;
  grpc::ClientContext context;
  const grpc::Status status = stub->Predict(&context, predict, &predicted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(predicted.model_spec().version().value(), 123);
  EXPECT_EQ(predicted.outputs().at("y").float_val(0), 3.0f);

  const HttpResult status_json = HttpClient(server_->rest_port()).Get("/v1/models/m");
  EXPECT_TRUE(Contains(status_json.body, "\"123\"") && Contains(status_json.body, "\"124\"")) << status_json.body;
}

// A new version whose checkpoint is damaged (a flipped byte in variables.data, then a
// truncated variables.index) fails to load with an error naming the file, and the version
// before it keeps serving every request.
TEST_F(SavedModelServingTest, ADamagedCheckpointNeverReplacesTheServingVersion) {
  const fs::path base = dir_ / "m";
  const fs::path source = kData / "saved_model_half_plus_two_2_versions";
  fs::create_directories(base);
  fs::copy(source / "00000123", base / "00000123", fs::copy_options::recursive);
  Serve(base);
  auto predict_ok = [&] {
    const HttpResult r = Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 5.0]})");
    return r.status == 200 && r.body == R"({"predictions": [2.5, 3.0, 4.5]})" &&
           HeaderOf(r, "x-model-version") == "123";
  };
  ASSERT_TRUE(predict_ok()) << server_->Log();

  struct Damage {
    const char* version;
    const char* file;
    std::function<void(const fs::path&)> apply;
  };
  const Damage damages[] = {
      {"00000124", "variables.data-00000-of-00001",
       [](const fs::path& f) {
         std::string bytes = ReadFile(f);
         bytes[8] ^= 0x01;  // inside variable b
         WriteFile(f, bytes);
       }},
      {"00000125", "variables.index", [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) - 9); }},
  };
  for (const Damage& d : damages) {
    // Written beside the base path and renamed in, as a deployment would.
    const fs::path staged = dir_ / (std::string("staged-") + d.version);
    fs::copy(source / "00000124", staged, fs::copy_options::recursive);
    d.apply(staged / "variables" / d.file);
    fs::rename(staged, base / d.version);
    ASSERT_TRUE(WaitFor([&] {
      const std::string log = server_->Log();
      return Contains(log, "event=version_load_failed") && Contains(log, d.file) &&
             Contains(log, std::string(d.version).substr(5));
    })) << server_->Log();
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(predict_ok()) << d.file << "\n" << server_->Log();
  }
  EXPECT_EQ(server_->Stop(), 0);
}

}  // namespace
}  // namespace lockstep::e2e
