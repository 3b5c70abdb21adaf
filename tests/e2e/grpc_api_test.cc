// Every gRPC method of PredictionService and ModelService.GetModelStatus, their answers and
// their errors with codes and messages, against the real binary over a real channel.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tests/e2e/grpc_test_util.h"

namespace lockstep::e2e {
namespace {

// The same tensor as raw row-major bytes in tensor_content.
tensorflow::TensorProto FloatContentTensor(const std::vector<float>& values) {
  tensorflow::TensorProto tensor;
  tensor.set_dtype(tensorflow::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(values.size()));
  tensor.set_tensor_content(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return tensor;
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

}  // namespace
}  // namespace lockstep::e2e
