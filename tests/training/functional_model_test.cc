// Models as graphs of layers (Keras's functional API): named layers, `inputs`, skip connections
// through add and multiply, concat, and the global pools. Planning, and every way a graph can
// fail to fit, named; training one is in trainer_test.cc and serving it in
// tests/e2e/training_parity_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/onnx/onnx_export.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/session.h"
#include "training/data/feature_stats.h"
#include "training/config.h"
#include "training/model_graph.h"
#include "training/random.h"

namespace lockstep::training {
namespace {

// A digits config (64 features, 10 classes) with `layers` (a JSON list) on an 8x8x1 image.
std::string DigitsGraphConfig(const std::string& layers) {
  return R"({"data": {"train": "d.csv"}, "model": {"input_shape": [8, 8, 1], "layers": )" + layers + "}}";
}

DataSchema DigitsSchema() {
  DataSchema s;
  for (int i = 0; i < 64; ++i) s.feature_keys.push_back({"f" + std::to_string(i), 1});
  for (int c = 0; c < 10; ++c) s.class_names.push_back(std::to_string(c));
  return s;
}

// PlanModel's error for a config that parses, or the parse error.
std::string GraphErrorOf(const std::string& layers) {
  StatusOr<TrainConfig> c = ParseTrainConfig(DigitsGraphConfig(layers), "g.json");
  if (!c.ok()) return c.status().message();
  StatusOr<ModelLayout> layout = PlanModel(c.value(), DigitsSchema());
  EXPECT_FALSE(layout.ok()) << layers;
  return layout.ok() ? "" : layout.status().message();
}

TEST(FunctionalModelTest, PlansAResidualBlockWithAConcatOfTwoPools) {
  StatusOr<TrainConfig> c = ParseTrainConfig(DigitsGraphConfig(R"([
      {"name": "stem", "type": "conv2d", "filters": 4, "padding": "same", "activation": "swish"},
      {"type": "conv2d", "filters": 4, "padding": "same", "activation": "leaky_relu"},
      {"name": "sum", "type": "add", "inputs": ["stem", "conv2d_1"]},
      {"name": "gate", "type": "multiply", "inputs": ["sum", "stem", "sum"]},
      {"name": "avg", "type": "global_avg_pool", "inputs": "gate"},
      {"name": "max", "type": "global_max_pool", "inputs": ["sum"]},
      {"type": "concat", "inputs": ["avg", "max", "avg"]},
      {"name": "out", "type": "dense", "units": 10}])"),
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<ModelLayout> layout = PlanModel(c.value(), DigitsSchema());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->layer_inputs, (std::vector<std::vector<int>>{{-1}, {0}, {0, 1}, {2, 0, 2}, {3}, {2}, {4, 5, 4}, {6}}));
  EXPECT_EQ(layout->layer_shapes, (std::vector<std::vector<int64_t>>{
                                      {8, 8, 4}, {8, 8, 4}, {8, 8, 4}, {8, 8, 4}, {4}, {4}, {12}, {10}}));
  std::vector<std::string> names;
  for (const WeightInfo& w : layout->weights) names.push_back(w.name);
  EXPECT_EQ(names, (std::vector<std::string>{"stem/kernel", "stem/bias", "conv2d_1/kernel", "conv2d_1/bias",
                                             "out/kernel", "out/bias"}));
  // The graphs build: the training graph's gradients reach every weight through the merges.
  ASSERT_TRUE(BuildTrainingGraph(c.value(), layout.value()).ok());
}

TEST(FunctionalModelTest, AGraphThatDoesNotFitNamesTheLayer) {
  EXPECT_EQ(GraphErrorOf(R"([{"type": "dense", "units": 10, "inputs": ["nowhere"]}])"),
            "g.json: model.layers[0].inputs: no layer is named 'nowhere' (\"input\" is the model's input)");
  EXPECT_EQ(GraphErrorOf(R"([{"name": "a", "type": "flatten", "inputs": ["b"]}, {"name": "b", "type": "flatten", "inputs": ["a"]},
                      {"type": "dense", "units": 10}])"),
            "g.json: model.layers[0].inputs: 'b' is model.layers[1], not a layer before this one: a layer takes "
            "only earlier layers' outputs (no cycles)");
  EXPECT_EQ(GraphErrorOf(R"([{"name": "a", "type": "flatten"}, {"name": "a", "type": "dense", "units": 10}])"),
            "g.json: model.layers[1].name: 'a' names an earlier layer too");
  EXPECT_EQ(GraphErrorOf(R"([{"name": "input", "type": "flatten"}, {"type": "dense", "units": 10}])"),
            "g.json: model.layers[0].name: 'input' names the model's input; choose another name");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "flatten"}, {"name": "classes", "type": "dense", "units": 10}])"),
            "g.json: model.layers[1].name: 'classes' names a node of the model's graphs; choose another name");
  EXPECT_EQ(GraphErrorOf(R"([{"name": "enc/attention", "type": "flatten"}, {"type": "dense", "units": 10}])"),
            "g.json: model.layers[0].name: 'enc/attention' has a '/', which separates a layer's name from its weights'");
  EXPECT_EQ(GraphErrorOf(R"([{"name": "a", "type": "flatten"}, {"name": "b", "type": "dense", "units": 5, "inputs": "a"},
                           {"type": "dense", "units": 10, "inputs": "a"}])"),
            "g.json: model.layers[1]: 'b' is the input of no later layer; the model's output is the last layer's");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "flatten"}, {"type": "add", "inputs": ["flatten_0"]}])"),
            "g.json: model.layers[1].inputs: must name at least 2 layers for an add layer");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "flatten"}, {"type": "dense", "units": 10, "inputs": ["flatten_0", "input"]}])"),
            "g.json: model.layers[1].inputs: names 2 layers, but a dense layer takes 1");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "flatten"}, {"type": "add", "inputs": ["flatten_0", "input"]}, {"type": "dense", "units": 10}])"),
            "model.layers[1]: an add layer's inputs must have one shape, got [64] and [8,8,1] (inputs[0] and inputs[1])");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "conv2d", "filters": 2}, {"type": "concat", "inputs": ["conv2d_0", "input"]},
                      {"type": "flatten"}, {"type": "dense", "units": 10}])"),
            "model.layers[1]: a concat layer's inputs must have one shape outside axis -1, got [6,6,2] and "
            "[8,8,1] (inputs[0] and inputs[1])");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "flatten"}, {"type": "concat", "axis": 1, "inputs": ["flatten_0", "flatten_0"]},
                      {"type": "dense", "units": 10}])"),
            "model.layers[1].axis: 1 is not an axis of its inputs [64]");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "flatten"}, {"type": "global_avg_pool"}, {"type": "dense", "units": 10}])"),
            "model.layers[1]: a global_avg_pool layer needs an input of [height, width, channels] or [tokens, dimension], got [64]");
}

TEST(FunctionalModelTest, PlansDepthwiseAndDilatedConvolutions) {
  StatusOr<TrainConfig> c = ParseTrainConfig(DigitsGraphConfig(R"([
      {"name": "dw", "type": "depthwise_conv2d", "depth_multiplier": 3, "strides": 2, "padding": "same"},
      {"name": "dilated", "type": "conv2d", "filters": 5, "kernel_size": 2, "dilation": 2},
      {"type": "flatten"},
      {"type": "dense", "units": 10}])"),
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<ModelLayout> layout = PlanModel(c.value(), DigitsSchema());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  // 8x8x1 -depthwise x3, stride 2-> 4x4x3 -2x2 taps 2 apart (a 3x3 extent), valid-> 2x2x5.
  EXPECT_EQ(layout->layer_shapes, (std::vector<std::vector<int64_t>>{{4, 4, 3}, {2, 2, 5}, {20}, {10}}));
  EXPECT_EQ(layout->weights[0].shape, (Shape{3, 3, 1, 3}));
  EXPECT_FALSE(layout->weights[0].product) << "a depthwise filter stays float32 under bf16";
  EXPECT_EQ(layout->weights[1].shape, (Shape{3}));
  EXPECT_EQ(layout->weights[2].shape, (Shape{2, 2, 3, 5}));
  ASSERT_TRUE(BuildTrainingGraph(c.value(), layout.value()).ok());
  EXPECT_EQ(GraphErrorOf(R"([{"type": "conv2d", "filters": 2, "kernel_size": 3, "dilation": 4}, {"type": "flatten"},
                           {"type": "dense", "units": 10}])"),
            "model.layers[0]: window 9 is larger than its input (8) with padding \"valid\"");
}

// The output of upsampling2d layer `up` (JSON) on one image of shape `in` holding `pixels`,
// run through the training graph (so through what its gradient is taken of); `out` its shape.
std::vector<float> Upsampled(const std::string& up, const std::vector<int64_t>& in, const std::vector<float>& pixels,
                             const std::vector<int64_t>& out) {
  StatusOr<TrainConfig> c = ParseTrainConfig(R"({"data": {"train": "d.csv"}, "model": {"input_shape": [)" +
                                                 std::to_string(in[0]) + ", " + std::to_string(in[1]) + ", " +
                                                 std::to_string(in[2]) + R"(], "normalize": false, "layers": [)" + up +
                                                 R"(, {"type": "global_avg_pool"}, {"type": "dense", "units": 2}]}})",
                                             "g.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  DataSchema schema;
  for (size_t i = 0; i < pixels.size(); ++i) schema.feature_keys.push_back({"p" + std::to_string(i), 1});
  schema.class_names = {"a", "b"};
  StatusOr<ModelLayout> layout = PlanModel(c.value(), schema);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok()) return {};
  EXPECT_EQ(layout->layer_shapes[0], out);
  StatusOr<Model> graph = BuildTrainingGraph(c.value(), layout.value());
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return {};
  graph->graph.signatures[0].outputs.push_back({"up", "up", DType::kFloat32, Shape{-1, out[0], out[1], out[2]}});
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(graph).value(), {});
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  std::vector<NamedTensor> feed = {
      {kFeaturesInput, Tensor::FromVector<float>(Shape{1, static_cast<int64_t>(pixels.size())}, pixels)},
      {kLabelsInput, Tensor::FromVector<int32_t>(Shape{1}, {0})},
      {"dense_2/kernel", Tensor::FromVector<float>(Shape{2, 2}, {1, 0, 0, 1})},
      {"dense_2/bias", Tensor::FromVector<float>(Shape{2}, {0, 0})}};
  std::vector<NamedTensor> result;
  EXPECT_TRUE(session.value()->Run(kTrainSignature, feed, &result).ok());
  if (result.empty()) return {};
  const auto up_values = result.back().tensor.data<float>();
  return {up_values.begin(), up_values.end()};
}

// upsampling2d repeats each pixel size x size times, and its gradient sums each block back.
TEST(FunctionalModelTest, UpsamplingRepeatsEachPixel) {
  const std::vector<float> up =
      Upsampled(R"({"name": "up", "type": "upsampling2d", "size": 3})", {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, {6, 6, 2});
  ASSERT_EQ(up.size(), 72u);
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 6; ++x) {
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(up[static_cast<size_t>((y * 6 + x) * 2 + k)], static_cast<float>(((y / 3) * 2 + x / 3) * 2 + k + 1));
      }
    }
  }
}

// upsampling2d "bilinear": each output pixel between its input neighbours, half-pixel centres
// (TensorFlow 2's and ONNX's), along both axes; an edge pixel's outer half repeats the edge.
TEST(FunctionalModelTest, BilinearUpsamplingInterpolatesBetweenPixelCentres) {
  std::vector<float> pixels(12);
  for (int i = 0; i < 12; ++i) pixels[static_cast<size_t>(i)] = static_cast<float>(i * i % 7) - 2.5f;
  const std::vector<float> up = Upsampled(R"({"name": "up", "type": "upsampling2d", "size": 2, "interpolation": "bilinear"})",
                                          {2, 3, 2}, pixels, {4, 6, 2});
  ASSERT_EQ(up.size(), 48u);
  // Output i of an axis of n samples the input at (i + 0.5) / 2 - 0.5, clamped to [0, n - 1].
  auto sample = [](int i, int n, int& lo, int& hi, double& frac) {
    const double at = std::clamp((i + 0.5) / 2 - 0.5, 0.0, n - 1.0);
    lo = static_cast<int>(std::floor(at));
    hi = std::min(lo + 1, n - 1);
    frac = at - lo;
  };
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 6; ++x) {
      int y0, y1, x0, x1;
      double fy, fx;
      sample(y, 2, y0, y1, fy);
      sample(x, 3, x0, x1, fx);
      for (int k = 0; k < 2; ++k) {
        auto p = [&](int r, int col) { return static_cast<double>(pixels[static_cast<size_t>((r * 3 + col) * 2 + k)]); };
        const double want = (1 - fy) * ((1 - fx) * p(y0, x0) + fx * p(y0, x1)) + fy * ((1 - fx) * p(y1, x0) + fx * p(y1, x1));
        EXPECT_NEAR(up[static_cast<size_t>((y * 6 + x) * 2 + k)], want, 1e-6) << y << "," << x << "," << k;
      }
    }
  }
  EXPECT_EQ(GraphErrorOf(R"([{"type": "upsampling2d", "interpolation": "bicubic"}, {"type": "flatten"},
                           {"type": "dense", "units": 10}])"),
            "g.json: model.layers[0].interpolation: must be one of nearest, bilinear, got \"bicubic\"");
}

// conv2d with groups: the input's channels in groups, each convolved with its own kernel
// ([k, k, in / groups, filters / groups]); served with a batch_norm folded into every group's
// kernel, and exported to ONNX the same.
TEST(FunctionalModelTest, GroupedConvolutionsConvolveEachGroupOnItsOwn) {
  StatusOr<TrainConfig> c = ParseTrainConfig(R"({"data": {"train": "d.csv"}, "model": {"input_shape": [1, 1, 4],
      "normalize": false, "layers": [
      {"name": "g", "type": "conv2d", "filters": 4, "kernel_size": 1, "groups": 2, "use_bias": false},
      {"name": "bn", "type": "batch_norm", "epsilon": 0.25},
      {"type": "flatten"}]}})",
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  DataSchema schema;
  for (int i = 0; i < 4; ++i) schema.feature_keys.push_back({"p" + std::to_string(i), 1});
  schema.class_names = {"a", "b", "c", "d"};
  StatusOr<ModelLayout> layout = PlanModel(c.value(), schema);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_GE(layout->weights.size(), 2u);
  EXPECT_EQ(layout->weights[0].name, "g/group_0/kernel");
  EXPECT_EQ(layout->weights[0].shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(layout->weights[1].name, "g/group_1/kernel");
  ASSERT_TRUE(BuildTrainingGraph(c.value(), layout.value()).ok());
  WeightMap w;
  w["g/group_0/kernel"] = Tensor::FromVector<float>(Shape{1, 1, 2, 2}, {1, 2, 3, 4});  // [in][out]
  w["g/group_1/kernel"] = Tensor::FromVector<float>(Shape{1, 1, 2, 2}, {-1, 0.5f, 2, -2});
  w["bn/gamma"] = Tensor::FromVector<float>(Shape{4}, {2, 1, 0.5f, 1});
  w["bn/beta"] = Tensor::FromVector<float>(Shape{4}, {0, 1, 0, -1});
  w["bn/moving_mean"] = Tensor::FromVector<float>(Shape{4}, {1, 0, -1, 2});
  w["bn/moving_variance"] = Tensor::FromVector<float>(Shape{4}, {3.75f, 0.75f, 0.75f, 3.75f});  // + eps: 4, 1, 1, 4
  StatusOr<Model> serving = BuildServingGraph(c.value(), layout.value(), w, FeatureStats{});
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  for (const NodeDef& n : serving->graph.nodes) EXPECT_NE(n.name, "bn/Mul") << "bn folds into the grouped conv";
  const std::vector<float> x = {1, -2, 0.5f, 3};
  // Group 0 reads channels 0, 1 and makes 0, 1; group 1 reads 2, 3 and makes 2, 3.
  const double conv[4] = {1 * 1 + -2 * 3, 1 * 2 + -2 * 4, 0.5 * -1 + 3 * 2, 0.5 * 0.5 + 3 * -2};
  const double scale[4] = {1, 1, 0.5, 0.5}, mean[4] = {1, 0, -1, 2}, beta[4] = {0, 1, 0, -1};
  double logits[4], total = 0;
  for (int k = 0; k < 4; ++k) total += std::exp(logits[k] = (conv[k] - mean[k]) * scale[k] + beta[k]);
  StatusOr<onnx::ModelProto> exported = ExportOnnxModel(serving.value());
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  StatusOr<Model> imported = ImportOnnxModel(*exported, {});
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  for (Model* m : {&serving.value(), &imported.value()}) {
    StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*m));
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    std::vector<NamedTensor> out;
    const std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Shape{1, 4}, x)}};
    ASSERT_TRUE((*session)->Run(kDefaultSignature, in, &out).ok());
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(out[0].tensor.data<float>()[k], std::exp(logits[k]) / total, 1e-6) << k;
  }
  EXPECT_EQ(GraphErrorOf(R"([{"type": "conv2d", "filters": 6, "groups": 4}, {"type": "flatten"},
                           {"type": "dense", "units": 10}])"),
            "g.json: model.layers[0].groups: must divide filters (6), got 4");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "conv2d", "filters": 4, "kernel_size": 1}, {"type": "conv2d", "filters": 6, "groups": 3},
                           {"type": "flatten"}, {"type": "dense", "units": 10}])"),
            "model.layers[1]: groups 3 must divide the input's 4 channels");
}

TEST(FunctionalModelTest, PlansAVisionTransformer) {
  StatusOr<TrainConfig> c = ParseTrainConfig(DigitsGraphConfig(R"([
      {"name": "patches", "type": "patch_embedding", "patch_size": 4, "dimension": 8},
      {"name": "positions", "type": "position_embedding"},
      {"name": "encoder", "type": "transformer_encoder", "heads": 2, "mlp_dim": 16},
      {"name": "attention", "type": "multi_head_attention", "heads": 8},
      {"type": "global_avg_pool"},
      {"type": "dense", "units": 10}])"),
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<ModelLayout> layout = PlanModel(c.value(), DigitsSchema());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  // 8x8 in 4x4 patches: 4 tokens of 8.
  EXPECT_EQ(layout->layer_shapes,
            (std::vector<std::vector<int64_t>>{{4, 8}, {4, 8}, {4, 8}, {4, 8}, {8}, {10}}));
  std::vector<std::pair<std::string, Shape>> weights;
  for (const WeightInfo& w : layout->weights) weights.emplace_back(w.name, w.shape);
  const std::vector<std::pair<std::string, Shape>> encoder = {
      {"encoder/norm1/gamma", Shape{8}},          {"encoder/norm1/beta", Shape{8}},
      {"encoder/attention/query/kernel", Shape{8, 8}}, {"encoder/attention/query/bias", Shape{8}},
      {"encoder/attention/key/kernel", Shape{8, 8}},   {"encoder/attention/key/bias", Shape{8}},
      {"encoder/attention/value/kernel", Shape{8, 8}}, {"encoder/attention/value/bias", Shape{8}},
      {"encoder/attention/output/kernel", Shape{8, 8}}, {"encoder/attention/output/bias", Shape{8}},
      {"encoder/norm2/gamma", Shape{8}},          {"encoder/norm2/beta", Shape{8}},
      {"encoder/mlp1/kernel", Shape{8, 16}},      {"encoder/mlp1/bias", Shape{16}},
      {"encoder/mlp2/kernel", Shape{16, 8}},      {"encoder/mlp2/bias", Shape{8}}};
  ASSERT_EQ(weights.size(), 2u + 1u + encoder.size() + 8u + 2u);
  EXPECT_EQ(weights[0], (std::pair<std::string, Shape>{"patches/kernel", Shape{4, 4, 1, 8}}));
  EXPECT_EQ(weights[2], (std::pair<std::string, Shape>{"positions/embeddings", Shape{4, 8}}));
  EXPECT_EQ(std::vector(weights.begin() + 3, weights.begin() + 3 + static_cast<std::ptrdiff_t>(encoder.size())),
            encoder);
  ASSERT_TRUE(BuildTrainingGraph(c.value(), layout.value()).ok());
}

// Given the ids as a second input, attention leaves out the keys whose id is padding_id: the
// outputs at the other positions do not change when the padded tokens' embedding does.
TEST(FunctionalModelTest, APaddingMaskHidesThePaddedKeys) {
  StatusOr<TrainConfig> c = ParseTrainConfig(R"({"data": {"train": "d.csv"}, "model": {"normalize": false, "layers": [
      {"type": "embedding", "vocabulary": 3, "dimension": 4},
      {"name": "attention", "type": "multi_head_attention", "heads": 2, "inputs": ["embedding_0", "input"]},
      {"type": "flatten"},
      {"type": "dense", "units": 2}]}})",
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  DataSchema schema;
  for (int i = 0; i < 5; ++i) schema.feature_keys.push_back({"t" + std::to_string(i), 1});
  schema.class_names = {"a", "b"};
  StatusOr<ModelLayout> layout = PlanModel(c.value(), schema);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  StatusOr<Model> graph = BuildTrainingGraph(c.value(), layout.value());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  graph->graph.signatures[0].outputs.push_back({"attention", "attention", DType::kFloat32, Shape{-1, 5, 4}});
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(graph).value(), {});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  // Ids 1 2 0 2 0: positions 2 and 4 are padding (id 0).
  std::vector<NamedTensor> in = {{kFeaturesInput, Tensor::FromVector<float>(Shape{1, 5}, {1, 2, 0, 2, 0})},
                                 {kLabelsInput, Tensor::FromVector<int32_t>(Shape{1}, {1})}};
  Random rng(5);
  for (const WeightInfo& w : layout->weights) {
    Tensor t(DType::kFloat32, w.shape);
    for (float& v : t.mutable_data<float>()) v = rng.UniformFloat() - 0.5f;
    in.push_back({w.name, t});
  }
  auto attention_out = [&](float padding_value) {
    for (NamedTensor& t : in) {
      if (t.name == "embedding_0/embeddings") {
        for (int k = 0; k < 4; ++k) t.tensor.mutable_data<float>()[static_cast<size_t>(k)] = padding_value;
      }
    }
    std::vector<NamedTensor> out;
    EXPECT_TRUE(session.value()->Run(kTrainSignature, in, &out).ok());
    const auto v = out.back().tensor.data<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  const std::vector<float> a = attention_out(0.25f), b = attention_out(-3.0f);
  for (int position : {0, 1, 3}) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(a[static_cast<size_t>(position * 4 + k)], b[static_cast<size_t>(position * 4 + k)]);
  }
  EXPECT_NE(a[2 * 4], b[2 * 4]) << "a padded position's own query still sees its embedding";
}

TEST(FunctionalModelTest, ATransformerThatDoesNotFitNamesTheLayer) {
  EXPECT_EQ(GraphErrorOf(R"([{"type": "patch_embedding", "patch_size": 3, "dimension": 8}, {"type": "flatten"},
                           {"type": "dense", "units": 10}])"),
            "model.layers[0].patch_size: 3 does not divide the image [8,8,1]");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "patch_embedding", "patch_size": 2, "dimension": 6},
                           {"type": "transformer_encoder", "heads": 4, "mlp_dim": 8}, {"type": "global_avg_pool"},
                           {"type": "dense", "units": 10}])"),
            "model.layers[1].heads: 4 heads do not divide the dimension 6");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "multi_head_attention", "heads": 1}, {"type": "flatten"}, {"type": "dense", "units": 10}])"),
            "model.layers[0]: a multi_head_attention layer needs an input of [tokens, dimension], got [8,8,1]; a "
            "patch_embedding or an embedding makes one");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "patch_embedding", "patch_size": 2, "dimension": 8},
                           {"type": "transformer_encoder", "heads": 2, "mlp_dim": 8, "inputs": ["patch_embedding_0", "input"]},
                           {"type": "global_avg_pool"}, {"type": "dense", "units": 10}])"),
            "model.layers[1].inputs[1]: the ids of the padding mask must be [16], one per token, got [8,8,1]");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "patch_embedding", "patch_size": 2, "dimension": 8}, {"type": "flatten"},
                           {"type": "transformer_encoder", "heads": 2, "mlp_dim": 8, "inputs": ["patch_embedding_0", "flatten_1"]},
                           {"type": "global_avg_pool"}, {"type": "dense", "units": 10}])"),
            "model.layers[2].inputs[1]: the padding mask's ids are the model's input (\"input\"), not a layer's output");
  EXPECT_EQ(GraphErrorOf(R"([{"type": "transformer_encoder", "heads": 2}])"),
            "g.json: model.layers[0].mlp_dim: is required for a transformer_encoder layer");
}

}  // namespace
}  // namespace lockstep::training

namespace lockstep::training {
namespace {

// batch_norm served: y = x * s + o with s = gamma / sqrt(moving_variance + epsilon) and
// o = beta - moving_mean * s. Folded into the dense layer before it (no op of its own left),
// or, after an activation, one Mul and one Add; both answer the formula.
TEST(FunctionalModelTest, BatchNormServesItsMovingAveragesFoldedWhereItCanBe) {
  StatusOr<TrainConfig> c = ParseTrainConfig(R"({"data": {"train": "d.csv"}, "model": {"normalize": false,
      "layers": [
      {"name": "lin", "type": "dense", "units": 2, "use_bias": false},
      {"name": "bn1", "type": "batch_norm", "epsilon": 0.25},
      {"name": "act", "type": "dense", "units": 2, "activation": "relu"},
      {"name": "bn2", "type": "batch_norm", "epsilon": 0.25}]}})",
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  DataSchema schema;
  schema.feature_keys = {{"a", 1}, {"b", 1}};
  schema.class_names = {"x", "y"};
  StatusOr<ModelLayout> layout = PlanModel(c.value(), schema);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  std::vector<std::string> state;
  for (const StateInfo& s : layout->state) state.push_back(s.name);
  EXPECT_EQ(state, (std::vector<std::string>{"bn1/moving_mean", "bn1/moving_variance", "bn2/moving_mean",
                                             "bn2/moving_variance"}));
  WeightMap w;
  auto set = [&](const std::string& name, std::vector<float> v) {
    w[name] = Tensor::FromVector<float>(Shape{static_cast<int64_t>(v.size())}, v);
  };
  w["lin/kernel"] = Tensor::FromVector<float>(Shape{2, 2}, {1, 2, -1, 0.5f});
  w["act/kernel"] = Tensor::FromVector<float>(Shape{2, 2}, {0.5f, -1, 1, 1});
  set("act/bias", {0.25f, -0.5f});
  for (const char* bn : {"bn1", "bn2"}) {
    set(std::string(bn) + "/gamma", {2, -0.5f});
    set(std::string(bn) + "/beta", {0.5f, 1});
    set(std::string(bn) + "/moving_mean", {1, -2});
    set(std::string(bn) + "/moving_variance", {3.75f, 0.75f});  // + epsilon: 4 and 1
  }
  StatusOr<Model> serving = BuildServingGraph(c.value(), layout.value(), w, FeatureStats{});
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  std::set<std::string> ops;
  for (const NodeDef& n : serving->graph.nodes) ops.insert(n.name);
  EXPECT_EQ(ops.count("bn1/Mul") + ops.count("bn1/Add"), 0u) << "bn1 folds into lin";
  EXPECT_EQ(ops.count("bn2/Mul") + ops.count("bn2/Add"), 2u) << "bn2 follows an activation";
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(serving).value());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<NamedTensor> out;
  const std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Shape{1, 2}, {1, 3})}};
  ASSERT_TRUE((*session)->Run(kDefaultSignature, in, &out).ok());
  // By hand: s = (2 / 2, -0.5 / 1) = (1, -0.5), o = (0.5 - 1, 1 - 1) = (-0.5, 0).
  auto bn = [](double v, int k) { return k == 0 ? v * 1 - 0.5 : v * -0.5; };
  const double lin[2] = {1 * 1 + 3 * -1, 1 * 2 + 3 * 0.5};                        // -2, 3.5
  const double h[2] = {bn(lin[0], 0), bn(lin[1], 1)};                             // -2.5, -1.75
  const double act[2] = {std::max(0.0, h[0] * 0.5 + h[1] * 1 + 0.25), std::max(0.0, h[0] * -1 + h[1] * 1 - 0.5)};
  const double logits[2] = {bn(act[0], 0), bn(act[1], 1)};
  const double p0 = 1 / (1 + std::exp(logits[1] - logits[0]));
  EXPECT_NEAR(out[0].tensor.data<float>()[0], p0, 1e-6);
  EXPECT_NEAR(out[0].tensor.data<float>()[1], 1 - p0, 1e-6);
}

TEST(FunctionalModelTest, BatchNormConfigsReadBackAndNameTheirMistakes) {
  StatusOr<TrainConfig> c = ParseTrainConfig(DigitsGraphConfig(R"([
      {"type": "conv2d", "filters": 4, "use_bias": false},
      {"type": "batch_norm", "momentum": 0.9, "epsilon": 0.001, "activation": "relu"},
      {"type": "flatten"}, {"type": "dense", "units": 10}])"),
                                             "g.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<TrainConfig> again = ParseTrainConfig(TrainConfigToJson(c.value()), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->model, c->model);
  EXPECT_FALSE(c->model.layers[0].use_bias);
  EXPECT_EQ(c->model.layers[1].momentum, 0.9);
  StatusOr<ModelLayout> layout = PlanModel(c.value(), DigitsSchema());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  std::vector<std::string> names;
  for (const WeightInfo& w : layout->weights) names.push_back(w.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv2d_0/kernel", "batch_norm_1/gamma", "batch_norm_1/beta",
                                             "dense_3/kernel", "dense_3/bias"}));
  EXPECT_EQ(layout->state[0].momentum, 0.9);
  EXPECT_EQ(layout->state[1].initial, 1.0f);
  StatusOr<TrainConfig> bad = ParseTrainConfig(DigitsGraphConfig(R"([{"type": "batch_norm", "momentum": 1.5}])"), "g.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("momentum"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace lockstep::training
