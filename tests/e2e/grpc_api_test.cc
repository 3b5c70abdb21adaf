// Every gRPC method of model-server (PredictionService and ModelService), its answers and its
// errors with their codes and messages, against the real binary over a real channel.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tensorflow_serving/config/model_server_config.pb.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

// A float vector x of shape [n] in float_val.
tensorflow::TensorProto FloatTensor(const std::vector<float>& values) {
  tensorflow::TensorProto tensor;
  tensor.set_dtype(tensorflow::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  for (float v : values) tensor.add_float_val(v);
  return tensor;
}

// The same tensor as raw row-major bytes in tensor_content.
tensorflow::TensorProto FloatContentTensor(const std::vector<float>& values) {
  tensorflow::TensorProto tensor;
  tensor.set_dtype(tensorflow::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  tensor.set_tensor_content(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return tensor;
}

// A tensor's floats, whichever encoding it came in.
std::vector<float> FloatsOf(const tensorflow::TensorProto& tensor) {
  if (!tensor.tensor_content().empty()) {
    std::vector<float> out(tensor.tensor_content().size() / sizeof(float));
    std::memcpy(out.data(), tensor.tensor_content().data(), out.size() * sizeof(float));
    return out;
  }
  return {tensor.float_val().begin(), tensor.float_val().end()};
}

tfs::PredictRequest PredictX(const std::string& model, const std::vector<float>& x) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name(model);
  (*request.mutable_inputs())["x"] = FloatTensor(x);
  return request;
}

// One tf.Example with float feature `name` = values.
tensorflow::Example FloatExample(const std::string& name, const std::vector<float>& values) {
  tensorflow::Example example;
  auto& list = *(*example.mutable_features()->mutable_feature())[name].mutable_float_list();
  for (float v : values) list.add_value(v);
  return example;
}

tfs::Input ExampleListX(const std::vector<float>& xs) {
  tfs::Input input;
  for (float x : xs) *input.mutable_example_list()->add_examples() = FloatExample("x", {x});
  return input;
}

// A text ModelServerConfig for `models`: (name, base_path, extra text inside the config block).
struct ConfigEntry {
  std::string name;
  fs::path base_path;
  std::string extra;
};
std::string ConfigText(const std::vector<ConfigEntry>& models) {
  std::string text = "model_config_list {\n";
  for (const ConfigEntry& m : models) {
    text += "  config {\n    name: \"" + m.name + "\"\n    base_path: \"" + m.base_path.string() +
            "\"\n    model_platform: \"tensorflow\"\n    " + m.extra + "\n  }\n";
  }
  return text + "}\n";
}

// The gRPC status as "CODE: message" for failure output.
std::string Describe(const grpc::Status& status) {
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

tfs::ModelSpec Spec(const std::string& name) {
  tfs::ModelSpec spec;
  spec.set_name(name);
  return spec;
}

// ---- Predict ----

TEST_F(GrpcApiTest, PredictFloatVal) {
  tfs::PredictResponse response;
  const grpc::Status status = Predict(PredictX("half_plus_two", {1.0f, 2.0f, 5.0f}), &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.outputs().size(), 1u);
  const tensorflow::TensorProto& y = response.outputs().at("y");
  EXPECT_EQ(y.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(y.tensor_shape().dim_size(), 1);
  EXPECT_EQ(y.tensor_shape().dim(0).size(), 3);
  EXPECT_EQ(FloatsOf(y), (std::vector<float>{2.5f, 3.0f, 4.5f}));
  EXPECT_EQ(response.model_spec().name(), "half_plus_two");
  EXPECT_EQ(response.model_spec().version().value(), 1);
  EXPECT_EQ(response.model_spec().signature_name(), "serving_default");
}

TEST_F(GrpcApiTest, PredictTensorContent) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("half_plus_two");
  (*request.mutable_inputs())["x"] = FloatContentTensor({1.0f, 2.0f, 5.0f, -4.0f});
  tfs::PredictResponse response;
  const grpc::Status status = Predict(request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(FloatsOf(response.outputs().at("y")), (std::vector<float>{2.5f, 3.0f, 4.5f, 0.0f}));
}

TEST_F(GrpcApiTest, PredictOutputFilter) {
  tfs::PredictRequest request = PredictX("half_plus_two", {2.0f});
  request.add_output_filter("y");
  tfs::PredictResponse response;
  const grpc::Status status = Predict(request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.outputs().size(), 1u);
  EXPECT_EQ(FloatsOf(response.outputs().at("y")), std::vector<float>{3.0f});

  request.clear_output_filter();
  request.add_output_filter("nope");
  const grpc::Status bad = PredictError(request);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(),
            "output tensor alias not found in signature: nope Outputs expected to be in the set {y}.");
}

TEST_F(GrpcApiTest, PredictNamedSignature) {
  tfs::PredictRequest request = PredictX("half_plus_two", {4.0f});
  request.mutable_model_spec()->set_signature_name("regress_x_to_y");
  tfs::PredictResponse response;
  const grpc::Status status = Predict(request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  // regress_x_to_y names its output "outputs".
  ASSERT_EQ(response.outputs().count("outputs"), 1u);
  EXPECT_EQ(FloatsOf(response.outputs().at("outputs")), std::vector<float>{4.0f});
  EXPECT_EQ(response.model_spec().signature_name(), "regress_x_to_y");
}

TEST_F(GrpcApiTest, PredictByVersionAndLabel) {
  int64_t served = 0;
  // No version: the highest one.
  EXPECT_EQ(VersionAnswer(Spec("versions"), &served), 2.0f);
  EXPECT_EQ(served, 2);

  tfs::ModelSpec spec = Spec("versions");
  spec.mutable_version()->set_value(1);
  EXPECT_EQ(VersionAnswer(spec, &served), 1.0f);
  EXPECT_EQ(served, 1);
  spec.mutable_version()->set_value(2);
  EXPECT_EQ(VersionAnswer(spec, &served), 2.0f);
  EXPECT_EQ(served, 2);

  spec.set_version_label("stable");
  EXPECT_EQ(VersionAnswer(spec, &served), 1.0f);
  EXPECT_EQ(served, 1);
  spec.set_version_label("canary");
  EXPECT_EQ(VersionAnswer(spec, &served), 2.0f);
  EXPECT_EQ(served, 2);
}

TEST_F(GrpcApiTest, PredictUnknownModelVersionOrLabelIsNotFound) {
  grpc::Status status = PredictError(PredictX("nope", {1.0f}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Servable not found for request: Latest(nope)");

  tfs::PredictRequest request = PredictX("versions", {1.0f});
  request.mutable_model_spec()->mutable_version()->set_value(3);
  status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Servable not found for request: Specific(versions, 3)");

  request.mutable_model_spec()->set_version_label("beta");
  status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Unrecognized servable version label: beta");
}

TEST_F(GrpcApiTest, PredictEmptyModelNameIsInvalid) {
  const grpc::Status status = PredictError(PredictX("", {1.0f}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "Missing model name in request.");
}

TEST_F(GrpcApiTest, PredictMissingOrUnknownInputIsInvalid) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("half_plus_two");
  grpc::Status status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "input 'x' of signature 'serving_default' is missing");

  request = PredictX("half_plus_two", {1.0f});
  (*request.mutable_inputs())["z"] = FloatTensor({1.0f});
  status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "input 'z' is not an input of signature 'serving_default'");
}

TEST_F(GrpcApiTest, PredictWrongDtypeIsInvalid) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("half_plus_two");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_INT32);
  x.mutable_tensor_shape()->add_dim()->set_size(2);
  x.add_int_val(1);
  x.add_int_val(2);
  const grpc::Status status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "input 'x' must be float32, got int32");
}

TEST_F(GrpcApiTest, PredictBadShapeIsInvalid) {
  // More values than the shape holds.
  tfs::PredictRequest request = PredictX("half_plus_two", {1.0f, 2.0f, 3.0f});
  (*request.mutable_inputs())["x"].mutable_tensor_shape()->mutable_dim(0)->set_size(2);
  grpc::Status status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "input 'x': DT_FLOAT tensor of shape [2] needs 2 values (or 1, repeated) in float_val, got 3");

  // A rank the signature does not take: [2, 2] for a [-1] input.
  request = PredictX("half_plus_two", {1.0f, 2.0f, 3.0f, 4.0f});
  tensorflow::TensorShapeProto& shape = *(*request.mutable_inputs())["x"].mutable_tensor_shape();
  shape.mutable_dim(0)->set_size(2);
  shape.add_dim()->set_size(2);
  status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "input 'x' must have shape [-1], got [2,2]");
}

TEST_F(GrpcApiTest, PredictUnknownSignatureIsInvalid) {
  tfs::PredictRequest request = PredictX("half_plus_two", {1.0f});
  request.mutable_model_spec()->set_signature_name("nope");
  const grpc::Status status = PredictError(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "Serving signature name: \"nope\" not found in signature def");
}

TEST_F(GrpcApiTest, PredictWithExpiredDeadline) {
  // grpc++ fails a call whose deadline has already passed on the client side: the status is
  // DEADLINE_EXCEEDED with gRPC's own message "Deadline Exceeded" (what this test sees today).
  // Should the request reach the server anyway, the server's own check answers the same code
  // with "the request's deadline passed before it could run". A client's deadline timer always
  // fires on its side too, so the server's message cannot be observed reliably from here.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  tfs::PredictResponse response;
  const grpc::Status status = Prediction()->Predict(&context, PredictX("half_plus_two", {1.0f}), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << Describe(status);
  EXPECT_TRUE(status.error_message() == "Deadline Exceeded" ||
              status.error_message() == "the request's deadline passed before it could run")
      << Describe(status);
  EXPECT_TRUE(response.outputs().empty());
}

TEST_F(GrpcApiTest, PredictLargeMessage) {
  // 10 MiB of floats each way: past gRPC's default 4 MiB limit on both sides (the harness's
  // channel lifts the client's; the server sets its own to the maximum).
  constexpr size_t kCount = (size_t{10} << 20) / sizeof(float);
  std::vector<float> x(kCount);
  for (size_t i = 0; i < kCount; ++i) x[i] = static_cast<float>(i % 1000);
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("half_plus_two");
  (*request.mutable_inputs())["x"] = FloatContentTensor(x);
  tfs::PredictResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const grpc::Status status = Prediction()->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  const std::vector<float> y = FloatsOf(response.outputs().at("y"));
  ASSERT_EQ(y.size(), kCount);
  for (size_t i : {size_t{0}, size_t{1}, size_t{999}, kCount / 2, kCount - 1}) {
    EXPECT_EQ(y[i], 0.5f * x[i] + 2.0f) << "at " << i;
  }
}

// ---- Classify / Regress / MultiInference ----

TEST_F(GrpcApiTest, ClassifyExampleList) {
  tfs::ClassificationRequest request;
  *request.mutable_model_spec() = Spec("half_plus_two");
  request.mutable_model_spec()->set_signature_name("classify_x_to_y");
  *request.mutable_input() = ExampleListX({1.0f, 4.0f});
  tfs::ClassificationResponse response;
  grpc::ClientContext context;
  const grpc::Status status = Prediction()->Classify(&context, request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.result().classifications_size(), 2);
  ASSERT_EQ(response.result().classifications(0).classes_size(), 1);
  EXPECT_EQ(response.result().classifications(0).classes(0).score(), 2.5f);
  EXPECT_EQ(response.result().classifications(0).classes(0).label(), "");  // the signature has no classes output
  ASSERT_EQ(response.result().classifications(1).classes_size(), 1);
  EXPECT_EQ(response.result().classifications(1).classes(0).score(), 4.0f);
  EXPECT_EQ(response.model_spec().name(), "half_plus_two");
  EXPECT_EQ(response.model_spec().version().value(), 1);
  EXPECT_EQ(response.model_spec().signature_name(), "classify_x_to_y");
}

TEST_F(GrpcApiTest, RegressExampleList) {
  tfs::RegressionRequest request;
  *request.mutable_model_spec() = Spec("half_plus_two");
  request.mutable_model_spec()->set_signature_name("regress_x_to_y");
  *request.mutable_input() = ExampleListX({0.0f, 2.0f, 6.0f});
  tfs::RegressionResponse response;
  grpc::ClientContext context;
  const grpc::Status status = Prediction()->Regress(&context, request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.result().regressions_size(), 3);
  EXPECT_EQ(response.result().regressions(0).value(), 2.0f);
  EXPECT_EQ(response.result().regressions(1).value(), 3.0f);
  EXPECT_EQ(response.result().regressions(2).value(), 5.0f);
  EXPECT_EQ(response.model_spec().signature_name(), "regress_x_to_y");
  EXPECT_EQ(response.model_spec().version().value(), 1);
}

TEST_F(GrpcApiTest, RegressAndClassifyExampleListWithContext) {
  // The first example carries its own x; the second takes the context's.
  tfs::Input input;
  auto& with_context = *input.mutable_example_list_with_context();
  *with_context.add_examples() = FloatExample("x", {2.0f});
  *with_context.add_examples() = FloatExample("unused", {7.0f});
  *with_context.mutable_context() = FloatExample("x", {10.0f});

  tfs::RegressionRequest regress;
  *regress.mutable_model_spec() = Spec("half_plus_two");
  regress.mutable_model_spec()->set_signature_name("regress_x_to_y");
  *regress.mutable_input() = input;
  tfs::RegressionResponse regress_response;
  grpc::ClientContext regress_context;
  grpc::Status status = Prediction()->Regress(&regress_context, regress, &regress_response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(regress_response.result().regressions_size(), 2);
  EXPECT_EQ(regress_response.result().regressions(0).value(), 3.0f);
  EXPECT_EQ(regress_response.result().regressions(1).value(), 7.0f);

  tfs::ClassificationRequest classify;
  *classify.mutable_model_spec() = Spec("half_plus_two");
  classify.mutable_model_spec()->set_signature_name("classify_x_to_y");
  *classify.mutable_input() = input;
  tfs::ClassificationResponse classify_response;
  grpc::ClientContext classify_context;
  status = Prediction()->Classify(&classify_context, classify, &classify_response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(classify_response.result().classifications_size(), 2);
  EXPECT_EQ(classify_response.result().classifications(0).classes(0).score(), 3.0f);
  EXPECT_EQ(classify_response.result().classifications(1).classes(0).score(), 7.0f);
}

TEST_F(GrpcApiTest, ClassifyAndRegressOnPredictSignatureAreInvalid) {
  tfs::ClassificationRequest classify;
  *classify.mutable_model_spec() = Spec("half_plus_two");  // serving_default: a predict signature
  *classify.mutable_input() = ExampleListX({1.0f});
  tfs::ClassificationResponse classify_response;
  grpc::ClientContext classify_context;
  grpc::Status status = Prediction()->Classify(&classify_context, classify, &classify_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
            "tensorflow/serving/predict");

  tfs::RegressionRequest regress;
  *regress.mutable_model_spec() = Spec("half_plus_two");
  *regress.mutable_input() = ExampleListX({1.0f});
  tfs::RegressionResponse regress_response;
  grpc::ClientContext regress_context;
  status = Prediction()->Regress(&regress_context, regress, &regress_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "Expected regression signature method_name to be tensorflow/serving/regress. Was: "
            "tensorflow/serving/predict");

  // A classify request on the regression signature is refused the same way.
  classify.mutable_model_spec()->set_signature_name("regress_x_to_y");
  grpc::ClientContext mismatched_context;
  status = Prediction()->Classify(&mismatched_context, classify, &classify_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("Was: tensorflow/serving/regress"), std::string::npos)
      << status.error_message();
}

TEST_F(GrpcApiTest, MultiInferenceClassifyAndRegress) {
  tfs::MultiInferenceRequest request;
  tfs::InferenceTask* classify = request.add_tasks();
  *classify->mutable_model_spec() = Spec("half_plus_two");
  classify->mutable_model_spec()->set_signature_name("classify_x_to_y");
  classify->set_method_name("tensorflow/serving/classify");
  tfs::InferenceTask* regress = request.add_tasks();
  *regress->mutable_model_spec() = Spec("half_plus_two");
  regress->mutable_model_spec()->set_signature_name("regress_x_to_y");
  regress->set_method_name("tensorflow/serving/regress");
  *request.mutable_input() = ExampleListX({2.0f, 8.0f});

  tfs::MultiInferenceResponse response;
  grpc::ClientContext context;
  const grpc::Status status = Prediction()->MultiInference(&context, request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.results_size(), 2);

  const tfs::InferenceResult& classified = response.results(0);
  ASSERT_TRUE(classified.has_classification_result());
  ASSERT_EQ(classified.classification_result().classifications_size(), 2);
  EXPECT_EQ(classified.classification_result().classifications(0).classes(0).score(), 3.0f);
  EXPECT_EQ(classified.classification_result().classifications(1).classes(0).score(), 6.0f);
  EXPECT_EQ(classified.model_spec().name(), "half_plus_two");
  EXPECT_EQ(classified.model_spec().version().value(), 1);
  EXPECT_EQ(classified.model_spec().signature_name(), "classify_x_to_y");

  const tfs::InferenceResult& regressed = response.results(1);
  ASSERT_TRUE(regressed.has_regression_result());
  ASSERT_EQ(regressed.regression_result().regressions_size(), 2);
  EXPECT_EQ(regressed.regression_result().regressions(0).value(), 3.0f);
  EXPECT_EQ(regressed.regression_result().regressions(1).value(), 6.0f);
  EXPECT_EQ(regressed.model_spec().signature_name(), "regress_x_to_y");
}

TEST_F(GrpcApiTest, MultiInferenceRejectsBadTasks) {
  tfs::MultiInferenceRequest request;
  *request.mutable_input() = ExampleListX({1.0f});
  tfs::MultiInferenceResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status status = Prediction()->MultiInference(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "Expected at least one task");
  }
  tfs::InferenceTask* task = request.add_tasks();
  *task->mutable_model_spec() = Spec("half_plus_two");
  task->mutable_model_spec()->set_signature_name("regress_x_to_y");
  task->set_method_name("tensorflow/serving/predict");
  {
    grpc::ClientContext context;
    const grpc::Status status = Prediction()->MultiInference(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_EQ(status.error_message(), "Unsupported signature method_name: tensorflow/serving/predict");
  }
}

// ---- GetModelMetadata ----

TEST_F(GrpcApiTest, GetModelMetadataSignatureDefs) {
  tfs::GetModelMetadataRequest request;
  *request.mutable_model_spec() = Spec("half_plus_two");
  request.add_metadata_field("signature_def");
  tfs::GetModelMetadataResponse response;
  grpc::ClientContext context;
  const grpc::Status status = Prediction()->GetModelMetadata(&context, request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(response.model_spec().name(), "half_plus_two");
  EXPECT_EQ(response.model_spec().version().value(), 1);

  ASSERT_EQ(response.metadata().count("signature_def"), 1u);
  tfs::SignatureDefMap signatures;
  ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&signatures))
      << response.metadata().at("signature_def").type_url();
  ASSERT_EQ(signatures.signature_def().size(), 3u);
  const tensorflow::SignatureDef& predict = signatures.signature_def().at("serving_default");
  EXPECT_EQ(predict.method_name(), "tensorflow/serving/predict");
  ASSERT_EQ(predict.inputs().count("x"), 1u);
  EXPECT_EQ(predict.inputs().at("x").dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(predict.inputs().at("x").tensor_shape().dim_size(), 1);
  EXPECT_EQ(predict.inputs().at("x").tensor_shape().dim(0).size(), -1);
  ASSERT_EQ(predict.outputs().count("y"), 1u);
  EXPECT_EQ(signatures.signature_def().at("classify_x_to_y").method_name(), "tensorflow/serving/classify");
  EXPECT_EQ(signatures.signature_def().at("classify_x_to_y").outputs().count("scores"), 1u);
  EXPECT_EQ(signatures.signature_def().at("regress_x_to_y").method_name(), "tensorflow/serving/regress");
  EXPECT_EQ(signatures.signature_def().at("regress_x_to_y").outputs().count("outputs"), 1u);
}

TEST_F(GrpcApiTest, GetModelMetadataErrors) {
  tfs::GetModelMetadataRequest request;
  *request.mutable_model_spec() = Spec("half_plus_two");
  tfs::GetModelMetadataResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status status = Prediction()->GetModelMetadata(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "GetModelMetadataRequest must specify at least one metadata_field");
  }
  request.add_metadata_field("warmup");
  {
    grpc::ClientContext context;
    const grpc::Status status = Prediction()->GetModelMetadata(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "Metadata field warmup is not supported");
  }
  request.clear_metadata_field();
  request.add_metadata_field("signature_def");
  request.mutable_model_spec()->set_name("nope");
  {
    grpc::ClientContext context;
    const grpc::Status status = Prediction()->GetModelMetadata(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(status.error_message(), "Servable not found for request: Latest(nope)");
  }
}

// ---- ModelService.GetModelStatus ----

TEST_F(GrpcApiTest, GetModelStatusAllVersions) {
  tfs::GetModelStatusResponse response;
  const grpc::Status status = GetStatus(Spec("versions"), &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.model_version_status_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const tfs::ModelVersionStatus& v = response.model_version_status(i);
    EXPECT_EQ(v.version(), i + 1);
    EXPECT_EQ(v.state(), tfs::ModelVersionStatus::AVAILABLE);
    EXPECT_EQ(v.status().error_code(), tensorflow::error::OK);
    EXPECT_EQ(v.status().error_message(), "");
  }
}

TEST_F(GrpcApiTest, GetModelStatusOneVersionOrLabel) {
  tfs::ModelSpec spec = Spec("versions");
  spec.mutable_version()->set_value(2);
  tfs::GetModelStatusResponse response;
  grpc::Status status = GetStatus(spec, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.model_version_status_size(), 1);
  EXPECT_EQ(response.model_version_status(0).version(), 2);
  EXPECT_EQ(response.model_version_status(0).state(), tfs::ModelVersionStatus::AVAILABLE);

  spec.set_version_label("stable");
  response.Clear();
  status = GetStatus(spec, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.model_version_status_size(), 1);
  EXPECT_EQ(response.model_version_status(0).version(), 1);

  spec.set_version_label("beta");
  status = GetStatus(spec, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Unrecognized servable version label: beta");

  spec.mutable_version()->set_value(3);
  status = GetStatus(spec, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Could not find version 3 of model versions");
}

TEST_F(GrpcApiTest, GetModelStatusUnknownModelIsNotFound) {
  tfs::GetModelStatusResponse response;
  grpc::Status status = GetStatus(Spec("nope"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Could not find any versions of model nope");

  status = GetStatus(Spec(""), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

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
