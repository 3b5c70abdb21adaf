// The REST bodies: both predict forms in and out, b64 strings, classify/regress examples.
#include <gtest/gtest.h>

#include "server/rest_json.h"

namespace lockstep {
namespace {

Signature OneInput(DType dtype = DType::kFloat32, Shape shape = Shape{-1}) {
  return {"serving_default", "tensorflow/serving/predict", {{"x", "x", dtype, shape}}, {{"y", "y", dtype, shape}}};
}

Signature TwoInputs() {
  return {"serving_default",
          "tensorflow/serving/predict",
          {{"a", "a", DType::kFloat32, Shape{-1}}, {"b", "b", DType::kString, Shape{-1, 2}}},
          {}};
}

StatusOr<std::vector<NamedTensor>> Decode(const std::string& body, const Signature& signature) {
  StatusOr<PredictBody> parsed = ParsePredictBody(body);
  if (!parsed.ok()) return parsed.status();
  return DecodePredictInputs(*parsed, signature);
}

TEST(RestJsonTest, RowFormWithOneInput) {
  StatusOr<std::vector<NamedTensor>> in = Decode(R"({"instances": [1.0, 2, -3.5]})", OneInput());
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->size(), 1u);
  EXPECT_EQ((*in)[0].name, "x");
  EXPECT_EQ((*in)[0].tensor.shape(), (Shape{3}));
  EXPECT_EQ((*in)[0].tensor.data<float>()[2], -3.5f);
  // A single input may be named too.
  in = Decode(R"({"instances": [{"x": 1.0}, {"x": 2.0}]})", OneInput());
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ((*in)[0].tensor.shape(), (Shape{2}));
}

TEST(RestJsonTest, RowFormWithNamedInputsStacksInstances) {
  StatusOr<std::vector<NamedTensor>> in = Decode(
      R"({"signature_name": "serving_default", "instances": [{"a": 1, "b": ["p", {"b64": "cXE="}]}, {"a": 2, "b": ["r", "s"]}]})",
      TwoInputs());
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->size(), 2u);
  EXPECT_EQ((*in)[0].tensor.shape(), (Shape{2}));
  EXPECT_EQ((*in)[1].tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ((*in)[1].tensor.data<std::string>()[1], "qq");
  EXPECT_EQ((*in)[1].tensor.data<std::string>()[3], "s");
}

TEST(RestJsonTest, ColumnarForm) {
  StatusOr<std::vector<NamedTensor>> in = Decode(R"({"inputs": {"a": [1, 2, 3], "b": [["p", "q"]]}})", TwoInputs());
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ((*in)[0].tensor.shape(), (Shape{3}));  // 0th dimensions may differ
  EXPECT_EQ((*in)[1].tensor.shape(), (Shape{1, 2}));
  in = Decode(R"({"inputs": [[1, 2], [3, 4]]})", OneInput(DType::kInt64, Shape{-1, 2}));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ((*in)[0].tensor.data<int64_t>()[3], 4);
}

TEST(RestJsonTest, NanAndInfinityAreAcceptedForFloats) {
  StatusOr<std::vector<NamedTensor>> in = Decode(R"({"instances": [NaN, Infinity, -Infinity]})", OneInput());
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_TRUE(std::isnan((*in)[0].tensor.data<float>()[0]));
  EXPECT_EQ((*in)[0].tensor.data<float>()[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ((*in)[0].tensor.data<float>()[2], -std::numeric_limits<float>::infinity());
  // Inside strings they are just text.
  in = Decode(R"({"instances": ["NaN", "Infinity"]})", OneInput(DType::kString));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ((*in)[0].tensor.data<std::string>()[1], "Infinity");
}

TEST(RestJsonTest, RejectsBadBodiesPrecisely) {
  auto error = [](const std::string& body, const Signature& sig) {
    StatusOr<std::vector<NamedTensor>> r = Decode(body, sig);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    return r.status().message();
  };
  EXPECT_NE(error("{", OneInput()).find("JSON Parse error"), std::string::npos);
  EXPECT_NE(error("[1]", OneInput()).find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(error("{}", OneInput()), "Missing 'inputs' or 'instances' key");
  EXPECT_NE(error(R"({"instances": [1], "inputs": [1]})", OneInput()).find("only one of"), std::string::npos);
  EXPECT_NE(error(R"({"instances": 1})", OneInput()).find("list/array"), std::string::npos);
  EXPECT_NE(error(R"({"instances": [1, [2]]})", OneInput()).find("not rectangular"), std::string::npos);
  EXPECT_NE(error(R"({"instances": ["a"]})", OneInput()).find("expected a number"), std::string::npos);
  EXPECT_NE(error(R"({"instances": [1.5]})", OneInput(DType::kInt32)).find("expected an integer"), std::string::npos);
  EXPECT_NE(error(R"({"instances": [{"b64": "AA=="}]})", OneInput()).find("DT_STRING"), std::string::npos);
  EXPECT_NE(error(R"({"instances": [{"b64": "!!"}]})", OneInput(DType::kString)).find("base64"), std::string::npos);
  EXPECT_NE(error(R"({"instances": [1], "signature_name": 3})", OneInput()).find("signature_name"), std::string::npos);
  EXPECT_NE(error(R"({"instances": [1], "extra": 3})", OneInput()).find("extra"), std::string::npos);
  EXPECT_EQ(error(R"({"instances": [{"a": 1}]})", TwoInputs()), "Missing named input: b in 'instances' object.");
  EXPECT_NE(error(R"({"instances": [{"a": 1, "b": ["p", "q"], "c": 1}]})", TwoInputs()).find("\"c\" is not an input"),
            std::string::npos);
  EXPECT_NE(error(R"({"instances": [{"a": 1, "b": ["p", "q"]}, 3]})", TwoInputs()).find("Expecting object"),
            std::string::npos);
  EXPECT_NE(error(R"({"inputs": [1, 2]})", TwoInputs()).find("must be an object naming them"), std::string::npos);
  EXPECT_NE(error(R"({"instances": []})", OneInput()).find("empty"), std::string::npos);
  EXPECT_NE(error(std::string(100, '[') + std::string(100, ']'), OneInput()).find("nests deeper"), std::string::npos);
}

TEST(RestJsonTest, WritesBothResponseForms) {
  std::vector<NamedTensor> one;
  one.push_back({"y", Tensor::FromVector<float>(Shape{3}, {2.5f, 3.0f, 0.1f})});
  std::string out;
  ASSERT_TRUE(WritePredictResponse(true, one, &out).ok());
  EXPECT_EQ(out, R"({"predictions": [2.5, 3.0, 0.1]})");
  ASSERT_TRUE(WritePredictResponse(false, one, &out).ok());
  EXPECT_EQ(out, R"({"outputs": [2.5, 3.0, 0.1]})");

  std::vector<NamedTensor> two;
  two.push_back({"scores", Tensor::FromVector<float>(Shape{2, 2}, {1, 2, 3, 4})});
  two.push_back({"id_bytes", Tensor::FromVector<std::string>(Shape{2}, {"ab", "c"})});
  ASSERT_TRUE(WritePredictResponse(true, two, &out).ok());
  EXPECT_EQ(out, R"({"predictions": [{"scores": [1.0, 2.0], "id_bytes": {"b64": "YWI="}}, )"
                 R"({"scores": [3.0, 4.0], "id_bytes": {"b64": "Yw=="}}]})");
  ASSERT_TRUE(WritePredictResponse(false, two, &out).ok());
  EXPECT_EQ(out, R"({"outputs": {"scores": [[1.0, 2.0], [3.0, 4.0]], "id_bytes": [{"b64": "YWI="}, {"b64": "Yw=="}]}})");

  two[1].tensor = Tensor::FromVector<std::string>(Shape{3}, {"a", "b", "c"});
  const Status s = WritePredictResponse(true, two, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Tensor name: id_bytes has inconsistent batch size: 3 expecting: 2");
}

TEST(RestJsonTest, ExamplesBecomeFeatures) {
  std::string signature;
  StatusOr<tensorflow::serving::Input> input = InputFromJson(
      R"({"signature_name": "c", "context": {"k": "v"}, "examples": [{"x": 1.5, "n": [1, 2], "s": {"b64": "cQ=="}}, {"x": 2}]})",
      &signature);
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  EXPECT_EQ(signature, "c");
  const auto& list = input->example_list_with_context();
  ASSERT_EQ(list.examples_size(), 2);
  const auto& f = list.examples(0).features().feature();
  EXPECT_EQ(f.at("x").float_list().value(0), 1.5f);
  EXPECT_EQ(f.at("n").int64_list().value(1), 2);
  EXPECT_EQ(f.at("s").bytes_list().value(0), "q");
  EXPECT_EQ(list.examples(1).features().feature().at("x").int64_list().value(0), 2);
  EXPECT_EQ(list.context().features().feature().at("k").bytes_list().value(0), "v");

  for (const char* bad : {R"({})", R"({"examples": 1})", R"({"examples": [1]})", R"({"examples": [{"x": []}]})",
                          R"({"examples": [{"x": [1, "a"]}]})", R"({"examples": [{"x": true}]})",
                          R"({"examples": [], "other": 1})", R"({"examples": [{"x": 1e300}]})"}) {
    EXPECT_EQ(InputFromJson(bad, &signature).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RestJsonTest, WritesResults) {
  tensorflow::serving::ClassificationResult classes;
  auto* c = classes.add_classifications()->add_classes();
  c->set_label("cat");
  c->set_score(0.25f);
  std::string out;
  WriteClassifyResponse(classes, &out);
  EXPECT_EQ(out, R"({"results": [[["cat", 0.25]]]})");
  tensorflow::serving::RegressionResult values;
  values.add_regressions()->set_value(2.5f);
  values.add_regressions()->set_value(3.0f);
  WriteRegressResponse(values, &out);
  EXPECT_EQ(out, R"({"results": [2.5, 3.0]})");
  EXPECT_EQ(ErrorJson("bad \"x\"\n"), R"({"error": "bad \"x\"\n"})");
}

}  // namespace
}  // namespace lockstep
