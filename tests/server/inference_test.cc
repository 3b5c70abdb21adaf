// Classify and regress on tf.Examples, the output filter, and the method checks, on a real
// Session (y = 0.5 x + 2, with TF Serving half_plus_two's signatures).
#include <gtest/gtest.h>

#include "runtime/graph_builder.h"
#include "server/inference.h"

namespace lockstep {
namespace {

namespace tfs = tensorflow::serving;

ServableHandle HalfPlusTwo() {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  const std::string y = g.Op("Add", {g.Op("Mul", {x, g.Const("a", Tensor::Scalar<float>(0.5f))}),
                                     g.Const("b", Tensor::Scalar<float>(2.0f))}, {}, "y");
  const std::string scores = g.Op("Reshape", {y}, {{"shape", std::vector<int64_t>{-1, 1}}}, "scores");
  g.AddSignature({"serving_default", std::string(kPredictMethod), {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"y", y, DType::kFloat32, Shape{-1}}, {"scores", scores, DType::kFloat32, Shape{-1, 1}}}});
  g.AddSignature({"regress", std::string(kRegressMethod), {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"outputs", y, DType::kFloat32, Shape{-1}}}});
  g.AddSignature({"classify", std::string(kClassifyMethod), {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"scores", scores, DType::kFloat32, Shape{-1, 1}}}});
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(g).Build());
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return std::make_shared<const LoadedVersion>("half_plus_two", 1, "/nonexistent", std::move(session).value(),
                                               std::chrono::system_clock::now());
}

// A servable and a runner of its graphs, alone or (with `batching`) in batches.
struct Served {
  explicit Served(BatchScheduler* batching = nullptr) : runner{servable, &record, batching} {}
  ServableHandle servable = HalfPlusTwo();
  RequestRecord record;
  GraphRunner runner;
};

tfs::Input Examples(std::initializer_list<float> xs, std::optional<float> context_x = std::nullopt) {
  tfs::Input input;
  auto* list = input.mutable_example_list_with_context();
  for (float x : xs) (*list->add_examples()->mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(x);
  if (context_x) {
    (*list->mutable_context()->mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(*context_x);
  }
  return input;
}

TEST(InferenceTest, RegressAndClassifyOnExamples) {
  Served served;
  const Session* session = &served.servable->session();
  tfs::RegressionResult regression;
  ASSERT_TRUE(RunRegress(served.runner, *session->FindSignature("regress"), Examples({1, 2, 5}), &regression).ok());
  ASSERT_EQ(regression.regressions_size(), 3);
  EXPECT_EQ(regression.regressions(2).value(), 4.5f);

  tfs::ClassificationResult classification;
  ASSERT_TRUE(RunClassify(served.runner, *session->FindSignature("classify"), Examples({2}), &classification).ok());
  ASSERT_EQ(classification.classifications_size(), 1);
  ASSERT_EQ(classification.classifications(0).classes_size(), 1);
  EXPECT_EQ(classification.classifications(0).classes(0).score(), 3.0f);
  EXPECT_EQ(classification.classifications(0).classes(0).label(), "");
}

TEST(InferenceTest, RegressClassifyAndPredictThroughTheBatchScheduler) {
  BatchScheduler batching(1, BatchingOptions{}, nullptr);
  Served served(&batching);
  const Session& session = served.servable->session();
  tfs::RegressionResult regression;
  ASSERT_TRUE(RunRegress(served.runner, *session.FindSignature("regress"), Examples({1, 2, 5}), &regression).ok());
  ASSERT_EQ(regression.regressions_size(), 3);
  EXPECT_EQ(regression.regressions(2).value(), 4.5f);
  tfs::ClassificationResult classification;
  ASSERT_TRUE(RunClassify(served.runner, *session.FindSignature("classify"), Examples({2}), &classification).ok());
  EXPECT_EQ(classification.classifications(0).classes(0).score(), 3.0f);
  std::vector<NamedTensor> inputs;
  inputs.push_back({"x", Tensor::FromVector<float>(Shape{2}, {1, 2})});
  std::vector<NamedTensor> outputs;
  const std::vector<std::string> filter = {"scores"};
  ASSERT_TRUE(RunPredict(served.runner, *session.FindSignature("serving_default"), inputs, filter, &outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(outputs[0].tensor.BitwiseEqual(Tensor::FromVector<float>(Shape{2, 1}, {2.5f, 3.0f})));
  EXPECT_GT(served.record.queue_seconds, 0);
  EXPECT_GT(served.record.compute_seconds, 0);
}

TEST(InferenceTest, ContextFillsMissingFeaturesAndExamplesWin) {
  Served served;
  const Session* session = &served.servable->session();
  tfs::Input input = Examples({4}, /*context_x=*/8);
  input.mutable_example_list_with_context()->add_examples();  // takes x from the context
  tfs::RegressionResult regression;
  ASSERT_TRUE(RunRegress(served.runner, *session->FindSignature("regress"), input, &regression).ok());
  ASSERT_EQ(regression.regressions_size(), 2);
  EXPECT_EQ(regression.regressions(0).value(), 4.0f);
  EXPECT_EQ(regression.regressions(1).value(), 6.0f);
}

TEST(InferenceTest, ExampleErrorsNameTheExampleAndFeature) {
  Served served;
  const Session* session = &served.servable->session();
  const Signature& regress = *session->FindSignature("regress");
  tfs::RegressionResult result;
  Status s = RunRegress(served.runner, regress, tfs::Input(), &result);
  EXPECT_EQ(s.message(), "Input is empty.");

  tfs::Input missing = Examples({1});
  missing.mutable_example_list_with_context()->add_examples();
  s = RunRegress(served.runner, regress, missing, &result);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("example 1 has no feature 'x'"), std::string::npos) << s.message();

  tfs::Input wrong_kind;
  (*wrong_kind.mutable_example_list()->add_examples()->mutable_features()->mutable_feature())["x"]
      .mutable_bytes_list()->add_value("a");
  s = RunRegress(served.runner, regress, wrong_kind, &result);
  EXPECT_NE(s.message().find("feature 'x' must be a float_list"), std::string::npos) << s.message();

  tfs::Input two_values = Examples({1});
  (*two_values.mutable_example_list_with_context()->mutable_examples(0)->mutable_features()->mutable_feature())["x"]
      .mutable_float_list()->add_value(2);
  s = RunRegress(served.runner, regress, two_values, &result);
  EXPECT_NE(s.message().find("has 2 values; the signature wants 1"), std::string::npos) << s.message();
}

TEST(InferenceTest, MethodsMustMatch) {
  Served served;
  const Session* session = &served.servable->session();
  tfs::ClassificationResult result;
  const Status s = RunClassify(served.runner, *session->FindSignature("serving_default"), Examples({1}), &result);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
            "tensorflow/serving/predict");
  tfs::RegressionResult regression;
  EXPECT_EQ(RunRegress(served.runner, *session->FindSignature("classify"), Examples({1}), &regression).code(),
            StatusCode::kInvalidArgument);
}

TEST(InferenceTest, OutputFilterSelectsAndOrders) {
  Served served;
  const Session* session = &served.servable->session();
  const Signature& predict = *session->FindSignature("serving_default");
  std::vector<NamedTensor> inputs;
  inputs.push_back({"x", Tensor::FromVector<float>(Shape{2}, {1, 2})});
  std::vector<NamedTensor> outputs;
  const std::vector<std::string> filter = {"scores"};
  ASSERT_TRUE(RunPredict(served.runner, predict, inputs, filter, &outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "scores");
  const std::vector<std::string> unknown = {"z"};
  Status s = RunPredict(served.runner, predict, inputs, unknown, &outputs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("output tensor alias not found in signature: z"), std::string::npos);
  const std::vector<std::string> twice = {"y", "y"};
  EXPECT_EQ(RunPredict(served.runner, predict, inputs, twice, &outputs).code(), StatusCode::kInvalidArgument);
}

TEST(InferenceTest, FindsSignaturesAndSpecs) {
  Served served;
  const Session* session = &served.servable->session();
  EXPECT_EQ((*FindServingSignature(*session, ""))->name, "serving_default");
  EXPECT_EQ(FindServingSignature(*session, "nope").status().message(),
            "Serving signature name: \"nope\" not found in signature def");
  tfs::ModelSpec spec;
  EXPECT_EQ(ServableRequestFromSpec(spec).status().code(), StatusCode::kInvalidArgument);
  spec.set_name("m");
  spec.set_version_label("stable");
  StatusOr<ServableRequest> request = ServableRequestFromSpec(spec);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->label, "stable");
  EXPECT_FALSE(request->version);
}

// A SavedModel's signature of one string vector fed as TensorFlow feeds takes the examples
// serialized, the context in front of each; a bundle's string feature still takes the
// feature's values. A context copied into every example is bounded.
TEST(InferenceTest, SerializedExamplesForSavedModelSignaturesOnly) {
  Signature sig{"classify", std::string(kClassifyMethod), {{"inputs", "inputs", DType::kString, Shape{-1}}}, {}};
  tfs::Input input;
  auto* list = input.mutable_example_list_with_context();
  (*list->mutable_context()->mutable_features()->mutable_feature())["inputs"].mutable_bytes_list()->add_value("c");
  list->add_examples();
  (*list->add_examples()->mutable_features()->mutable_feature())["inputs"].mutable_bytes_list()->add_value("e");

  StatusOr<std::vector<NamedTensor>> features = TensorsFromExamples(sig, input);
  ASSERT_TRUE(features.ok()) << features.status().ToString();
  EXPECT_EQ(features->at(0).tensor.data<std::string>()[0], "c");  // the feature's values
  EXPECT_EQ(features->at(0).tensor.data<std::string>()[1], "e");

  sig.inputs[0].any_shape = true;
  ASSERT_TRUE(TakesSerializedExamples(sig));
  StatusOr<std::vector<NamedTensor>> serialized = TensorsFromExamples(sig, input);
  ASSERT_TRUE(serialized.ok()) << serialized.status().ToString();
  const std::string context = list->context().SerializeAsString();
  EXPECT_EQ(serialized->at(0).tensor.data<std::string>()[0], context + list->examples(0).SerializeAsString());
  EXPECT_EQ(serialized->at(0).tensor.data<std::string>()[1], context + list->examples(1).SerializeAsString());

  // 1 MiB of context times 1100 examples of nothing: refused before anything is copied.
  (*list->mutable_context()->mutable_features()->mutable_feature())["big"].mutable_bytes_list()->add_value(
      std::string(size_t{1} << 20, 'x'));
  for (int i = 0; i < 1100; ++i) list->add_examples();
  EXPECT_EQ(TensorsFromExamples(sig, input).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace lockstep
