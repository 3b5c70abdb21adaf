#include "training/model_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "runtime/op_registry.h"
#include "runtime/session.h"
#include "training/data/csv_reader.h"
#include "training/data/pipeline.h"
#include "training/data/split.h"
#include "training/initializers.h"
#include "training/optimizer.h"

namespace lockstep::training {
namespace {

TrainConfig Mlp(std::vector<LayerConfig> layers) {
  TrainConfig c;
  c.model.layers = std::move(layers);
  return c;
}

// `features` columns f0, f1, ... and `classes` classes "0", "1", ...
DataSchema Schema(int64_t features, int32_t classes) {
  DataSchema s;
  for (int64_t i = 0; i < features; ++i) s.feature_keys.push_back({"f" + std::to_string(i), 1});
  for (int32_t c = 0; c < classes; ++c) s.class_names.push_back(std::to_string(c));
  return s;
}

LayerConfig Dense(int64_t units, std::string activation) {
  LayerConfig l;
  l.type = "dense";
  l.units = units;
  l.activation = std::move(activation);
  return l;
}

TEST(ModelGraphTest, PlansDenseWeights) {
  StatusOr<ModelLayout> layout = PlanModel(Mlp({Dense(16, "relu"), Dense(10, "softmax")}), Schema(64, 10));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout.value().weights.size(), 4u);
  EXPECT_EQ(layout.value().weights[0].name, "dense_0/kernel");
  EXPECT_EQ(layout.value().weights[0].shape, (Shape{64, 16}));
  EXPECT_EQ(layout.value().weights[0].initializer, "glorot_uniform");
  EXPECT_EQ(layout.value().weights[3].name, "dense_1/bias");
  EXPECT_EQ(layout.value().weights[3].initializer, "zeros");
}

TEST(ModelGraphTest, PlanErrorsNameTheLayer) {
  EXPECT_EQ(PlanModel(Mlp({Dense(16, "relu"), Dense(3, "softmax")}), Schema(64, 10)).status().message(),
            "model.layers[1]: the model ends with outputs [3], but the data has 10 classes");
  EXPECT_EQ(PlanModel(Mlp({Dense(16, "softmax"), Dense(10, "")}), Schema(64, 10)).status().message(),
            "model.layers[0]: softmax only as the last layer's activation");
  EXPECT_EQ(
      PlanModel(Mlp({Dense(10, "sigmoid")}), Schema(64, 10)).status().message(),
      "model.layers[0]: activation \"sigmoid\" does not go with loss softmax_cross_entropy, which applies "
      "softmax itself (use \"softmax\" or none)");
  LayerConfig conv;
  conv.type = "conv2d";
  conv.filters = 4;
  conv.kernel_size = 3;
  EXPECT_EQ(PlanModel(Mlp({conv, Dense(10, "")}), Schema(64, 10)).status().message(),
            "model.layers[0]: a conv2d layer needs an input of [height, width, channels], got [64]; set "
            "model.input_shape (e.g. [8, 8, 1])");
  TrainConfig image = Mlp({conv, Dense(10, "")});
  image.model.input_shape = {8, 8, 1};
  EXPECT_EQ(PlanModel(image, Schema(64, 10)).status().message(),
            "model.layers[1]: a dense layer needs a flat input, got [6,6,4]; add a flatten layer before it");
  image.model.input_shape = {8, 4, 2};
  conv.kernel_size = 5;
  image.model.layers[0] = conv;
  EXPECT_EQ(PlanModel(image, Schema(64, 10)).status().message(),
            "model.layers[0]: window 5 is larger than its input (4) with padding \"valid\"");
  image.model.input_shape = {8, 9, 1};
  EXPECT_EQ(PlanModel(image, Schema(64, 10)).status().message(),
            "model.input_shape: [8,9,1] holds 72 values, but the data has 64 features");
  LayerConfig embedding;
  embedding.type = "embedding";
  embedding.vocabulary = 17;
  embedding.dimension = 4;
  EXPECT_EQ(PlanModel(Mlp({embedding, Dense(10, "")}), Schema(64, 10)).status().message(),
            "model.normalize: must be false with an embedding layer, whose ids are looked up as they are");
  EXPECT_EQ(
      PlanModel(Mlp({Dense(10, ""), embedding}), Schema(64, 10)).status().message(),
      "model.layers[1]: an embedding layer takes the model's input, flat: it looks up the raw features as ids");
}

LayerConfig Layer(std::string type) {
  LayerConfig l;
  l.type = std::move(type);
  return l;
}

TEST(ModelGraphTest, PlansEveryLayerKind) {
  TrainConfig c;
  c.model.input_shape = {8, 8, 1};
  LayerConfig conv = Layer("conv2d");
  conv.filters = 6;
  conv.padding = "same";
  LayerConfig pool = Layer("max_pool2d");  // 2x2, stride 2
  pool.strides = 2;
  LayerConfig avg = Layer("avg_pool2d");
  avg.pool_size = 3;
  avg.strides = 1;
  LayerConfig dropout = Layer("dropout");
  dropout.rate = 0.25;
  c.model.layers = {conv, pool, avg, Layer("layer_norm"), Layer("flatten"), dropout, Dense(10, "softmax")};
  StatusOr<ModelLayout> layout = PlanModel(c, Schema(64, 10));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  std::vector<std::pair<std::string, Shape>> weights;
  for (const WeightInfo& w : layout.value().weights) weights.emplace_back(w.name, w.shape);
  // 8x8 -same conv-> 8x8x6 -pool-> 4x4x6 -avg 3x3 valid-> 2x2x6 -> 24
  EXPECT_EQ(weights, (std::vector<std::pair<std::string, Shape>>{{"conv2d_0/kernel", Shape{3, 3, 1, 6}},
                                                                 {"conv2d_0/bias", Shape{6}},
                                                                 {"layer_norm_3/gamma", Shape{6}},
                                                                 {"layer_norm_3/beta", Shape{6}},
                                                                 {"dense_6/kernel", Shape{24, 10}},
                                                                 {"dense_6/bias", Shape{10}}}));
  EXPECT_EQ(layout.value().weights[2].initializer, "ones");
  EXPECT_TRUE(layout.value().has_dropout);
  EXPECT_EQ(layout.value().weights[0].fan_in, 9);
}

// The whole chain on the real digits: split, normalisation statistics, the pipeline, the
// training graph's loss and gradients, Adam; then the serving graph built from the trained
// weights classifies the held-out rows, and gives exactly the probabilities the training
// graph's logits give.
TEST(ModelGraphTest, TrainsDigitsAndServesTheSameNumbers) {
  StatusOr<LabelledTable> read = ReadCsv(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv", {});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const LabelledTable& table = read.value();
  const RowSplit split = StratifiedSplit(table.labels, 0.2, 0);
  const FeatureStats stats = ComputeFeatureStats(table, split.train);

  TrainConfig config;
  config.model = Mlp({Dense(32, "relu"), Dense(10, "softmax")}).model;
  StatusOr<ModelLayout> layout = PlanModel(config, DataSchema::Of(table));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  StatusOr<Model> train_graph = BuildTrainingGraph(config, layout.value());
  ASSERT_TRUE(train_graph.ok()) << train_graph.status().ToString();
  StatusOr<std::unique_ptr<Session>> trainer = Session::Create(std::move(train_graph).value(), {});
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();

  Random rng(0);
  WeightMap weights;
  for (const WeightInfo& w : layout.value().weights) {
    Tensor t(DType::kFloat32, w.shape);
    ASSERT_TRUE(Initialize(w.initializer, w.fan_in, w.fan_out, rng, t.mutable_data<float>()).ok());
    weights[w.name] = t;
  }
  OptimizerConfig adam;
  adam.learning_rate = 0.01;
  StatusOr<Optimizer> optimizer = Optimizer::Create(adam);
  ASSERT_TRUE(optimizer.ok());

  const int64_t f = table.num_features();
  const Tensor mean = Tensor::FromVector<float>(Shape{f}, stats.mean);
  const Tensor std = Tensor::FromVector<float>(Shape{f}, stats.std);
  BatchPipeline pipeline(table, split.train, {.batch_size = 32, .shuffle_buffer = 10000, .seed = 1});
  double first_loss = 0, last_loss = 0;
  std::vector<NamedTensor> in, out;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    pipeline.StartEpoch(epoch);
    double sum = 0;
    int batches = 0;
    while (const Batch* b = pipeline.Next()) {
      in = {{kFeaturesInput, b->features}, {kLabelsInput, b->labels}, {kMeanInput, mean}, {kStdInput, std}};
      for (const WeightInfo& w : layout.value().weights) in.push_back({w.name, weights[w.name]});
      ASSERT_TRUE(trainer.value()->Run(kTrainSignature, in, &out).ok());
      sum += out[0].tensor.data<float>()[0];
      ++batches;
      std::vector<Parameter> params;
      for (size_t i = 0; i < layout.value().weights.size(); ++i) {
        params.push_back({weights[layout.value().weights[i].name].mutable_data<float>(),
                          out[2 + i].tensor.data<float>(),
                          {}});
      }
      optimizer.value().Apply(params, adam.learning_rate);
    }
    if (epoch == 0) first_loss = sum / batches;
    last_loss = sum / batches;
  }
  EXPECT_LT(last_loss, first_loss / 4) << "first epoch " << first_loss << ", last " << last_loss;

  StatusOr<Model> serving = BuildServingGraph(config, layout.value(), weights, stats);
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  StatusOr<std::unique_ptr<Session>> server = Session::Create(std::move(serving).value(), {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();

  // The held-out rows in one batch, through both graphs.
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int64_t r : split.held_out) {
    x.insert(x.end(), table.row(r).begin(), table.row(r).end());
    y.push_back(table.labels[static_cast<size_t>(r)]);
  }
  const auto n = static_cast<int64_t>(y.size());
  const Tensor features = Tensor::FromVector<float>(Shape{n, f}, x);
  std::vector<NamedTensor> served;
  const std::vector<NamedTensor> request = {{"x", features}};
  ASSERT_TRUE(server.value()->Run("serving_default", request, &served).ok());
  const Tensor& probabilities = served[0].tensor;
  const Tensor& classes = served[1].tensor;
  int correct = 0;
  for (int64_t i = 0; i < n; ++i)
    correct += classes.data<int64_t>()[static_cast<size_t>(i)] == y[static_cast<size_t>(i)];
  const double accuracy = static_cast<double>(correct) / static_cast<double>(n);
  EXPECT_GT(accuracy, 0.93) << correct << " of " << n;

  in = {{kFeaturesInput, features},
        {kLabelsInput, Tensor::FromVector<int32_t>(Shape{n}, y)},
        {kMeanInput, mean},
        {kStdInput, std}};
  for (const WeightInfo& w : layout.value().weights) in.push_back({w.name, weights[w.name]});
  ASSERT_TRUE(trainer.value()->Run(kTrainSignature, in, &out).ok());
  StatusOr<std::vector<Tensor>> softmax = RunOp("Softmax", std::vector<Tensor>{out[1].tensor});
  ASSERT_TRUE(softmax.ok());
  EXPECT_TRUE(softmax.value()[0].BitwiseEqual(probabilities)) << "training and serving disagree";
}

// Label smoothing e: the loss is the cross-entropy against targets 1 - e + e / K on the label
// and e / K elsewhere (softmax), or 1 - e / 2 and e / 2 per class (sigmoid), computed here from
// the graph's own logits in double.
TEST(ModelGraphTest, LabelSmoothingIsTheCrossEntropyOfSmoothedTargets) {
  for (const char* loss : {"softmax_cross_entropy", "sigmoid_cross_entropy"}) {
    SCOPED_TRACE(loss);
    TrainConfig config = Mlp({Dense(4, "")});
    config.model.normalize = false;
    config.loss = loss;
    config.label_smoothing = 0.2;
    StatusOr<ModelLayout> layout = PlanModel(config, Schema(3, 4));
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    StatusOr<Model> graph = BuildTrainingGraph(config, layout.value());
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(graph).value(), {});
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    const std::vector<int32_t> labels = {2, 0};
    std::vector<NamedTensor> in = {
        {kFeaturesInput, Tensor::FromVector<float>(Shape{2, 3}, {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f})},
        {kLabelsInput, Tensor::FromVector<int32_t>(Shape{2}, labels)},
        {"dense_0/kernel", Tensor::FromVector<float>(Shape{3, 4}, {0.3f, -0.2f, 0.5f, 0.1f, -0.4f, 0.6f, 0.2f, -0.3f,
                                                                   0.7f, 0.05f, -0.6f, 0.25f})},
        {"dense_0/bias", Tensor::FromVector<float>(Shape{4}, {0.1f, -0.1f, 0.2f, 0.0f})}};
    std::vector<NamedTensor> out;
    ASSERT_TRUE(session.value()->Run(kTrainSignature, in, &out).ok());
    const auto logits = out[1].tensor.data<float>();
    const double e = 0.2;
    double expected = 0;
    for (size_t row = 0; row < 2; ++row) {
      const float* z = logits.data() + row * 4;
      if (std::string(loss) == "softmax_cross_entropy") {
        double max = z[0], sum = 0;
        for (int k = 1; k < 4; ++k) max = std::max<double>(max, z[k]);
        for (int k = 0; k < 4; ++k) sum += std::exp(z[k] - max);
        for (int k = 0; k < 4; ++k) {
          const double target = (k == labels[row] ? 1 - e : 0) + e / 4;
          expected -= target * (z[k] - max - std::log(sum));
        }
      } else {
        for (int k = 0; k < 4; ++k) {
          const double target = k == labels[row] ? 1 - e / 2 : e / 2;
          const double p = 1 / (1 + std::exp(-static_cast<double>(z[k])));
          expected -= target * std::log(p) + (1 - target) * std::log(1 - p);
        }
      }
    }
    expected /= 2;
    EXPECT_NEAR(out[0].tensor.data<float>()[0], expected, 1e-5);
  }
}

}  // namespace
}  // namespace lockstep::training
