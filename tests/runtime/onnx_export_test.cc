// The ONNX exporter (runtime/onnx/onnx_export.h): a graph of every op it translates, exported,
// read back by the importer (ONNX's checker and shape inference run on the way in) and run,
// answers what the graph itself answers; what it cannot translate is an error naming the node.
// tests/e2e/training_parity_test.cc runs model-train's exports in onnxruntime itself.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "runtime/graph_builder.h"
#include "runtime/onnx/onnx_export.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

Tensor Values(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kFloat32, shape);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& v : t.mutable_data<float>()) {
    s = s * 1664525u + 1013904223u;
    v = scale * (static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
  }
  return t;
}

AttrMap Window(std::vector<int64_t> strides, const std::string& padding, std::vector<int64_t> dilations = {1, 1}) {
  return AttrMap{{"strides", strides}, {"padding", padding}, {"dilations", dilations}};
}

// An image model with every translated op on its path: NHWC convolutions (SAME with stride and
// dilation, VALID, EXPLICIT), depthwise, both pools, bias, the activations, a bf16 product, a
// tiny attention (BatchMatMul, Transpose, Softmax), layer norm, reductions, reshapes, a
// classification head with ArgMax, and string class names broadcast beside the scores.
Model ImageModel() {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1, 9, 10, 3});
  std::string y = g.Op("Normalize", {x, g.Const("mean", Values(Shape{3}, 1, 0.1f)), g.Const("std", Tensor::FromVector<float>(Shape{3}, {0.5f, 1.5f, 2.0f}))});
  y = g.Op("Conv2D", {y, g.Const("k1", Values(Shape{3, 3, 3, 8}, 2, 0.4f))}, Window({2, 1}, "SAME", {1, 2}), "conv1");
  y = g.Op("BiasAdd", {y, g.Const("b1", Values(Shape{8}, 3, 0.1f))});
  y = g.Op("Silu", {y});
  y = g.Op("DepthwiseConv2D", {y, g.Const("dw", Values(Shape{3, 3, 8, 2}, 4, 0.4f))}, Window({1, 1}, "SAME"), "depthwise");
  y = g.Op("HardSwish", {y});
  AttrMap explicit_pads = Window({1, 1}, "EXPLICIT");
  explicit_pads.Set("explicit_paddings", std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 0});
  AttrMap bf16 = explicit_pads;
  bf16.Set("precision", std::string("bfloat16"));
  y = g.Op("Conv2D", {y, g.Const("k2", Values(Shape{2, 2, 16, 32}, 5, 0.3f))}, bf16, "conv2");
  y = g.Op("LeakyRelu", {y}, AttrMap{{"alpha", 0.2}});
  const std::string pooled =
      g.Op("MaxPool2D", {y}, AttrMap{{"ksize", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}, {"padding", std::string("SAME")}});
  const std::string averaged = g.Op("AvgPool2D", {y}, AttrMap{{"ksize", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}, {"padding", std::string("SAME")}});
  y = g.Op("Concat", {pooled, averaged}, AttrMap{{"axis", int64_t{3}}});  // [N, 3, 6, 64]
  y = g.Op("Conv2D", {y, g.Const("k3", Values(Shape{1, 1, 64, 16}, 6, 0.2f))}, Window({1, 1}, "VALID"), "pointwise");
  y = g.Op("Relu6", {y});
  // Attention over the 18 pixels as tokens of width 16.
  std::string tokens = g.Op("Reshape", {y}, AttrMap{{"shape", std::vector<int64_t>{-1, 18, 16}}});
  tokens = g.Op("LayerNormalize", {tokens}, AttrMap{{"epsilon", 1e-3}});
  const std::string q = g.Op("Mul", {tokens, g.Const("scale", Tensor::Scalar<float>(0.25f))});
  AttrMap against_keys{{"transpose_b", true}, {"precision", std::string("bfloat16")}};
  const std::string scores = g.Op("BatchMatMul", {q, tokens}, against_keys);
  std::string context = g.Op("BatchMatMul", {g.Op("Softmax", {scores}), tokens});
  context = g.Op("Transpose", {context}, AttrMap{{"perm", std::vector<int64_t>{0, 2, 1}}});  // [N, 16, 18]
  std::string features = g.Op("Mean", {context}, AttrMap{{"axes", std::vector<int64_t>{2}}});
  features = g.Op("Gelu", {features});
  const std::string flat = g.Op("Flatten", {g.Op("Sum", {context}, AttrMap{{"axes", std::vector<int64_t>{1}}, {"keep_dims", true}})});
  features = g.Op("Concat", {features, g.Op("Tanh", {flat})}, AttrMap{{"axis", int64_t{1}}});  // [N, 34]
  AttrMap transpose_b{{"transpose_b", true}};
  std::string logits = g.Op("MatMul", {features, g.Const("head", Values(Shape{4, 34}, 7, 0.5f))}, transpose_b);
  logits = g.Op("Sub", {logits, g.Const("shift", Values(Shape{4}, 8, 0.2f))});
  const std::string probabilities = g.Op("Softmax", {logits}, {}, "probabilities");
  const std::string classes = g.Op("ArgMax", {logits}, {}, "classes");
  Tensor names(DType::kString, Shape{1, 4});
  for (int i = 0; i < 4; ++i) names.mutable_data<std::string>()[i] = "class " + std::to_string(i);
  const std::string labels = g.Op("BroadcastLike", {g.Const("names", names), probabilities}, {}, "labels");
  g.AddSignature({"serving_default",
                  "tensorflow/serving/predict",
                  {{"images", x, DType::kFloat32, Shape{-1, 9, 10, 3}}},
                  {{"probabilities", probabilities, DType::kFloat32, Shape{-1, 4}},
                   {"classes", classes, DType::kInt64, Shape{-1}},
                   {"labels", labels, DType::kString, Shape{-1, 4}}}});
  return std::move(g).Build();
}

// A token model: ids through an embedding (Cast, Gather), a bf16 MatMul whose weight is a bf16
// constant made by a Cast, and a padding mask (Equal).
Model TokenModel() {
  GraphBuilder g;
  const std::string ids = g.Input("ids", DType::kFloat32, Shape{-1, 6});
  const std::string as_int = g.Op("Cast", {ids}, AttrMap{{"dtype", DType::kInt64}});
  std::string y = g.Op("Gather", {g.Const("embeddings", Values(Shape{12, 8}, 9)), as_int});  // [N, 6, 8]
  const std::string padded = g.Op("Cast", {g.Op("Equal", {ids, g.Const("pad", Tensor::Scalar<float>(0.0f))})}, AttrMap{{"dtype", DType::kFloat32}});
  y = g.Op("Reshape", {y}, AttrMap{{"shape", std::vector<int64_t>{-1, 8}}});
  const std::string w = g.Op("Cast", {g.Const("w", Values(Shape{8, 3}, 10))}, AttrMap{{"dtype", DType::kBFloat16}});
  y = g.Op("MatMul", {y, w}, AttrMap{{"precision", std::string("bfloat16")}});
  y = g.Op("Sigmoid", {g.Op("Reshape", {y}, AttrMap{{"shape", std::vector<int64_t>{-1, 18}}})});
  const std::string out = g.Op("Concat", {y, padded}, AttrMap{{"axis", int64_t{1}}}, "out");
  g.AddSignature({"serving_default", "", {{"ids", ids, DType::kFloat32, Shape{-1, 6}}}, {{"out", out, DType::kFloat32, Shape{-1, 24}}}});
  return std::move(g).Build();
}

// Images of any size: SAME windows become ONNX's auto_pad SAME_UPPER (TensorFlow's SAME).
Model AnySizeModel() {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1, -1, -1, 2});
  std::string y = g.Op("Conv2D", {x, g.Const("k", Values(Shape{3, 3, 2, 4}, 12, 0.5f))}, Window({2, 2}, "SAME"));
  y = g.Op("MaxPool2D", {y}, AttrMap{{"ksize", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}, {"padding", std::string("SAME")}});
  y = g.Op("AvgPool2D", {y}, AttrMap{{"ksize", std::vector<int64_t>{2, 2}}, {"padding", std::string("SAME")}}, "out");
  g.AddSignature({"serving_default", "", {{"x", x, DType::kFloat32, Shape{-1, -1, -1, 2}}}, {{"out", y, DType::kFloat32, Shape{-1, -1, -1, 4}}}});
  return std::move(g).Build();
}

std::vector<NamedTensor> RunModel(Model model, const std::string& input, const Tensor& x) {
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(model));
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  std::vector<NamedTensor> outputs;
  const std::vector<NamedTensor> inputs = {{input, x}};
  Status s = (*session)->Run(kDefaultSignature, inputs, &outputs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return outputs;
}

// Exports `model`, reads the ONNX model back through the importer, and runs both on `x`.
void ExpectRoundTripAgrees(const Model& model, const std::string& input, const Tensor& x) {
  StatusOr<onnx::ModelProto> proto = ExportOnnxModel(model);
  ASSERT_TRUE(proto.ok()) << proto.status().ToString();
  EXPECT_EQ(proto->opset_import(0).version(), 17);
  StatusOr<Model> imported = ImportOnnxModel(*proto, {});
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const std::vector<NamedTensor> want = RunModel(model, input, x), got = RunModel(std::move(*imported), input, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    const NamedTensor* match = nullptr;
    for (const NamedTensor& g : got) match = g.name == want[i].name ? &g : match;
    ASSERT_NE(match, nullptr);
    const Tensor& a = want[i].tensor;
    const Tensor& b = match->tensor;
    ASSERT_EQ(a.dtype(), b.dtype());
    ASSERT_EQ(a.shape(), b.shape());
    if (a.dtype() != DType::kFloat32) {
      EXPECT_TRUE(a.BitwiseEqual(b));
      continue;
    }
    for (int64_t k = 0; k < a.num_elements(); ++k) {
      ASSERT_NEAR(a.data<float>()[k], b.data<float>()[k], 1e-5) << "element " << k;
    }
  }
}

TEST(OnnxExport, AnImageModelReadBackAnswersAsItself) {
  ExpectRoundTripAgrees(ImageModel(), "images", Values(Shape{5, 9, 10, 3}, 11, 2.0f));
}

TEST(OnnxExport, ATokenModelReadBackAnswersAsItself) {
  Tensor ids(DType::kFloat32, Shape{4, 6});
  auto v = ids.mutable_data<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 5) % 12);
  ExpectRoundTripAgrees(TokenModel(), "ids", ids);
}

TEST(OnnxExport, SameWindowsOnImagesOfAnySizeReadBackAnswerAsThemselves) {
  ExpectRoundTripAgrees(AnySizeModel(), "x", Values(Shape{2, 11, 7, 2}, 13));
  ExpectRoundTripAgrees(AnySizeModel(), "x", Values(Shape{1, 4, 9, 2}, 14));
}

TEST(OnnxExport, TheGraphIsTheSignaturesUnderItsKeys) {
  StatusOr<onnx::ModelProto> proto = ExportOnnxModel(ImageModel());
  ASSERT_TRUE(proto.ok()) << proto.status().ToString();
  const onnx::GraphProto& graph = proto->graph();
  ASSERT_EQ(graph.input_size(), 1);
  EXPECT_EQ(graph.input(0).name(), "images");
  const auto& dims = graph.input(0).type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 4);
  EXPECT_EQ(dims[0].dim_param(), "batch");
  EXPECT_EQ(dims[3].dim_value(), 3);
  ASSERT_EQ(graph.output_size(), 3);
  EXPECT_EQ(graph.output(0).name(), "probabilities");
  EXPECT_EQ(graph.output(1).type().tensor_type().elem_type(), onnx::TensorProto::INT64);
  EXPECT_EQ(graph.output(2).type().tensor_type().elem_type(), onnx::TensorProto::STRING);
  // Weights are initializers; nothing the signature does not need is exported.
  int initializers_named_k1 = 0;
  for (const auto& t : graph.initializer()) initializers_named_k1 += t.name() == "k1";
  EXPECT_EQ(initializers_named_k1, 1);
}

TEST(OnnxExport, WritesAFileTheImporterReads) {
  const fs::path dir = fs::temp_directory_path() / ("onnx_export_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(WriteOnnxModel(TokenModel(), kDefaultSignature, dir / "model.onnx").ok());
  EXPECT_FALSE(fs::exists(dir / "model.onnx.tmp"));
  StatusOr<Model> read = ReadOnnxModel(dir);
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  const Status unwritable = WriteOnnxModel(TokenModel(), kDefaultSignature, dir / "missing" / "model.onnx");
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("missing"), std::string::npos) << unwritable.message();
  fs::remove_all(dir);
}

TEST(OnnxExport, WhatHasNoTranslationIsAnErrorNamingIt) {
  {
    StatusOr<onnx::ModelProto> proto = ExportOnnxModel(ImageModel(), "classify");
    ASSERT_FALSE(proto.ok());
    EXPECT_EQ(proto.status().code(), StatusCode::kNotFound);
    EXPECT_NE(proto.status().message().find("serving_default"), std::string::npos) << proto.status().message();
  }
  {
    GraphBuilder g;
    const std::string x = g.Input("x", DType::kFloat32, Shape{-1, 4});
    const std::string y = g.Op("CumSum", {x, g.Const("axis", Tensor::Scalar<int64_t>(1))}, {}, "running");
    g.AddSignature({"serving_default", "", {{"x", x, DType::kFloat32, Shape{-1, 4}}}, {{"y", y, DType::kFloat32, Shape{-1, 4}}}});
    StatusOr<onnx::ModelProto> proto = ExportOnnxModel(std::move(g).Build());
    ASSERT_FALSE(proto.ok());
    EXPECT_EQ(proto.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(proto.status().message().find("node 'running'"), std::string::npos) << proto.status().message();
    EXPECT_NE(proto.status().message().find("CumSum"), std::string::npos) << proto.status().message();
  }
  {
    // An attr the translation would drop: refused, not ignored.
    GraphBuilder g;
    const std::string x = g.Input("x", DType::kFloat32, Shape{-1, 4});
    const std::string y = g.Op("Softmax", {x}, AttrMap{{"temperature", 2.0}}, "softer");
    g.AddSignature({"serving_default", "", {{"x", x, DType::kFloat32, Shape{-1, 4}}}, {{"y", y, DType::kFloat32, Shape{-1, 4}}}});
    StatusOr<onnx::ModelProto> proto = ExportOnnxModel(std::move(g).Build());
    ASSERT_FALSE(proto.ok());
    EXPECT_NE(proto.status().message().find("node 'softer'"), std::string::npos) << proto.status().message();
    EXPECT_NE(proto.status().message().find("attr 'temperature'"), std::string::npos) << proto.status().message();
  }
}

}  // namespace
}  // namespace lockstep
