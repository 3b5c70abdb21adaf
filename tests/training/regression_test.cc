// Regression: float targets (one or several) from CSV columns and tf.Example keys, in memory
// and streamed; the three losses, computed the same way by the training graph and by the
// evaluation through the serving graph; the exported signatures; and every bad input named.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "runtime/bundle/bundle.h"
#include "tensorflow/core/example/example.pb.h"
#include "training/config.h"
#include "training/data/csv_reader.h"
#include "runtime/tfrecord.h"
#include "training/model_graph.h"
#include "training/trainer.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

class RegressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lockstep_regression_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  // y = 2 a - 3 b + 1 on a grid of (a, b), a CSV with columns a, b, y.
  std::string LinearCsv(const std::string& name, int n) const {
    std::string text = "a,b,y\n";
    for (int i = 0; i < n; ++i) {
      const double a = (i % 13) / 6.0 - 1.0, b = (i % 7) / 3.0 - 1.0;
      text += std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(2 * a - 3 * b + 1) + "\n";
    }
    return Write(name, text);
  }

  // The same function as tf.train.Examples: "x" holds (a, b), "y" the target, or with
  // `width` 2 the targets (2 a - 3 b + 1, a + b). Record `bad_target_at`'s target is NaN.
  std::string LinearExamples(const std::string& name, int n, int width = 1, int bad_target_at = -1) const {
    std::ofstream out(dir_ / name, std::ios::binary);
    for (int i = 0; i < n; ++i) {
      const float a = static_cast<float>((i % 13) / 6.0 - 1.0), b = static_cast<float>((i % 7) / 3.0 - 1.0);
      tensorflow::Example e;
      auto& f = *e.mutable_features()->mutable_feature();
      f["x"].mutable_float_list()->add_value(a);
      f["x"].mutable_float_list()->add_value(b);
      f["y"].mutable_float_list()->add_value(i == bad_target_at ? std::numeric_limits<float>::quiet_NaN()
                                                                : 2 * a - 3 * b + 1);
      if (width == 2) f["y"].mutable_float_list()->add_value(a + b);
      out << FrameTfRecord(e.SerializeAsString());
    }
    return (dir_ / name).string();
  }

  // `c` on the tf.Example files train.tfrecord and test.tfrecord of `n` and `n_test` records
  // (targets `width` wide), trained in memory (first) and streamed (second) through the same
  // shuffle buffer, each keeping its test outputs.
  std::pair<StatusOr<TrainReport>, StatusOr<TrainReport>> MemoryAndStreaming(TrainConfig c, int n, int n_test,
                                                                              int width) const {
    c.data.format = "tfrecord";
    c.data.features = {"x"};
    c.data.train = {LinearExamples("train.tfrecord", n, width)};
    c.data.test = {LinearExamples("test.tfrecord", n_test, width)};
    c.data.shuffle_buffer = 64;
    c.data.mode = "memory";
    StatusOr<TrainReport> memory = Train(c, "line", {.keep_test_predictions = true});
    c.data.mode = "streaming";
    return {std::move(memory), Train(c, "line", {.keep_test_predictions = true})};
  }

  static TrainConfig Config(const std::string& loss, int64_t outputs = 1) {
    TrainConfig c;
    c.task = "regression";
    c.loss = loss;
    c.data.label = "y";
    c.data.targets = {"y"};
    c.data.test_fraction = 0;
    LayerConfig hidden, out;
    hidden.type = out.type = "dense";
    hidden.units = 16;
    hidden.activation = "relu";
    out.units = outputs;
    c.model.layers = {hidden, out};
    c.epochs = 30;
    c.batch_size = 16;
    c.replicas = 1;
    c.optimizer.learning_rate = 0.01;
    return c;
  }

  fs::path dir_;
};

TEST_F(RegressionTest, ConfigTakesTheTaskAndChecksItsLossesAndMetrics) {
  StatusOr<TrainConfig> c = ParseTrainConfig(
      R"({"task": "regression", "data": {"train": "t.csv", "label": "y"}, "model": {"layers": [{"type": "dense", "units": 1}]}})",
      "r.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->loss, "mean_squared_error");
  EXPECT_EQ(c->data.targets, std::vector<std::string>{"y"});
  EXPECT_EQ(c->huber_delta, 1.0);
  StatusOr<TrainConfig> again = ParseTrainConfig(TrainConfigToJson(*c), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *c);

  const std::string model = R"("model": {"layers": [{"type": "dense", "units": 1}]})";
  auto error = [&](const std::string& fields) {
    StatusOr<TrainConfig> bad = ParseTrainConfig("{" + fields + ", " + model + "}", "r.json");
    return bad.ok() ? std::string("ok") : bad.status().message();
  };
  EXPECT_NE(error(R"("task": "regression", "loss": "softmax_cross_entropy", "data": {"train": "t.csv"})")
                .find("r.json: loss: 'softmax_cross_entropy' is a classification loss"),
            std::string::npos);
  EXPECT_NE(error(R"("loss": "huber", "data": {"train": "t.csv"})").find("r.json: loss: 'huber' is a regression loss"),
            std::string::npos);
  EXPECT_NE(error(R"("data": {"train": "t.csv", "targets": ["y"]})")
                .find("data.targets: is for task regression only (set \"task\": \"regression\")"),
            std::string::npos);
  EXPECT_NE(error(R"("task": "regression", "data": {"train": "t.csv", "label": "price", "targets": ["log_price"]})")
                .find("data.label: 'price' is not one of data.targets"),
            std::string::npos);
  EXPECT_NE(error(R"("task": "regression", "huber_delta": 2, "data": {"train": "t.csv"})")
                .find("huber_delta: is for loss huber only, and the loss is mean_squared_error"),
            std::string::npos);
  EXPECT_NE(error(R"("task": "regression", "data": {"train": "t.csv", "validation": ["v.csv"]},
                     "export": {"best_by": "val_accuracy"})")
                .find("export.best_by: val_accuracy is a classification metric"),
            std::string::npos);
  EXPECT_NE(error(R"("task": "regression", "loss": "huber", "huber_delta": 0, "data": {"train": "t.csv"})")
                .find("huber_delta: must be > 0"),
            std::string::npos);
  StatusOr<TrainConfig> huber = ParseTrainConfig(
      R"({"task": "regression", "loss": "huber", "huber_delta": 2.5, "data": {"train": "t.csv", "targets": ["y", "z"]},)" +
          model + "}",
      "h.json");
  ASSERT_TRUE(huber.ok()) << huber.status().ToString();
  EXPECT_EQ(huber->huber_delta, 2.5);
  StatusOr<TrainConfig> huber_again = ParseTrainConfig(TrainConfigToJson(*huber), "again.json");
  ASSERT_TRUE(huber_again.ok()) << huber_again.status().ToString();
  EXPECT_EQ(*huber_again, *huber);
  EXPECT_NE(error(R"("task": "regression", "data": {"train": "t.csv", "targets": ["y", "z"], "features": ["z"]})")
                .find("'z' is a target, not a feature"),
            std::string::npos);
  EXPECT_NE(error(R"("task": "guess", "data": {"train": "t.csv"})").find("task"), std::string::npos);
}

TEST_F(RegressionTest, CsvTargetsAreNumbersBesideTheFeatures) {
  CsvOptions options;
  options.target_columns = {"w", "y"};
  StatusOr<LabelledTable> t = ParseCsv("a,w,b,y\n1,10,2,20\n3,30,4,40.5\n", "t.csv", options);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t->target_names, (std::vector<std::string>{"w", "y"}));
  EXPECT_EQ(t->features, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(t->targets, (std::vector<float>{10, 20, 30, 40.5f}));
  EXPECT_EQ(t->labels, (std::vector<int32_t>{0, 0}));

  StatusOr<LabelledTable> bad = ParseCsv("a,y\n1,2\n3,tall\n", "t.csv", {.feature_columns = {}, .target_columns = {"y"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "t.csv:3: column 'y': 'tall' is not a finite number");
  StatusOr<LabelledTable> missing = ParseCsv("a,y\n1,2\n", "t.csv", {.feature_columns = {}, .target_columns = {"z"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "t.csv:1: no target column 'z'");
}

// Each loss as the training graph computes it (the first epoch's loss, a single batch of every
// row, before its update) is the loss the evaluation through the serving graph computes on the
// same rows (its update all but nothing): the two definitions agree, Huber's on both sides of
// delta.
TEST_F(RegressionTest, TheGraphsLossesAreTheEvaluationsLosses) {
  const std::string data = LinearCsv("line.csv", 200);
  for (const char* loss : {"mean_squared_error", "mean_absolute_error", "huber"}) {
    TrainConfig c = Config(loss);
    c.data.train = {data};
    c.data.test = {data};
    c.data.shuffle_buffer = 0;
    c.batch_size = 200;
    c.epochs = 1;
    c.optimizer.type = "sgd";
    c.optimizer.learning_rate = 1e-12;
    c.huber_delta = 1.5;
    StatusOr<TrainReport> r = Train(c, "line");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_NEAR(r->train_loss, r->test_loss, 1e-5 * std::max(1.0, r->test_loss)) << loss;
    EXPECT_NEAR(r->train_mse, r->test_mse, 1e-5 * std::max(1.0, r->test_mse)) << loss;
    EXPECT_NEAR(r->train_mae, r->test_mae, 1e-5 * std::max(1.0, r->test_mae)) << loss;
    if (std::string(loss) == "mean_squared_error") {
      EXPECT_NEAR(r->test_loss, r->test_mse, 1e-9);
    }
    if (std::string(loss) == "mean_absolute_error") {
      EXPECT_NEAR(r->test_loss, r->test_mae, 1e-9);
    }
    if (std::string(loss) == "huber") {
      // Errors on both sides of delta: below the half squared error, above the linear part.
      EXPECT_LT(r->test_loss, r->test_mse / 2) << "some errors beyond delta";
      EXPECT_GT(r->test_loss, 1.5 * r->test_mae - 1.5 * 1.5 / 2) << "some errors within delta";
    }
  }
}

// Every loss learns the function, on one replica and on two.
TEST_F(RegressionTest, EachLossLearnsALinearFunction) {
  const std::string train = LinearCsv("train.csv", 400);
  const std::string test = LinearCsv("test.csv", 91);
  for (const char* loss : {"mean_squared_error", "mean_absolute_error", "huber"}) {
    for (int replicas : {1, 2}) {
      TrainConfig c = Config(loss);
      c.data.train = {train};
      c.data.test = {test};
      c.replicas = replicas;
      StatusOr<TrainReport> r = Train(c, "line");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      // The targets span [-3, 6]: a model that learned nothing is off by about 2 on average.
      EXPECT_LT(r->test_mae, 0.15) << loss << " replicas " << replicas;
      EXPECT_TRUE(r->regression);
    }
  }
}

// Several targets: the linnerud table (three exercises, three body measurements) from
// examples/data; predict serves every target, and there is no regression signature, whose
// answer holds one value per example.
TEST_F(RegressionTest, SeveralTargetsServedByPredict) {
  TrainConfig c = Config("mean_squared_error", 3);
  c.data.train = {std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/linnerud.csv"};
  c.data.targets = {"weight", "waist", "pulse"};
  c.data.test = c.data.train;  // 20 rows are too few to hold any out: the fit is what is measured
  c.batch_size = 4;
  c.epochs = 400;
  c.optimizer.learning_rate = 0.3;  // from outputs near 0 to weights near 180
  c.export_.dir = (dir_ / "export").string();
  StatusOr<TrainReport> r = Train(c, "linnerud", {.keep_test_predictions = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_classes, 3);
  EXPECT_EQ(r->test_probabilities.size(), r->test_features.size());  // three features, three outputs a row
  // Weights near 180, waists near 35, pulses near 55; predicting each target's mean is off by
  // 8.9 on average.
  EXPECT_LT(r->test_mae, 6);
  StatusOr<Model> bundle = ReadBundle(r->export_path);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  ASSERT_EQ(bundle->graph.signatures.size(), 1u);
  const Signature& predict = bundle->graph.signatures[0];
  ASSERT_EQ(predict.outputs.size(), 1u);
  EXPECT_EQ(predict.outputs[0].key, "outputs");
  EXPECT_EQ(predict.outputs[0].shape, (Shape{-1, 3}));
  EXPECT_EQ(bundle->graph.metadata.at("task"), "regression");
  EXPECT_EQ(bundle->graph.metadata.at("target_names"), R"(["weight","waist","pulse"])");

  TrainConfig wrong = c;
  wrong.model.layers.back().units = 2;
  StatusOr<TrainReport> refused = Train(wrong, "linnerud");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "model.layers[1]: the model ends with outputs [2], but the data has 3 target values: end with a dense "
            "layer of 3 units");
}

// tf.Example targets, in memory and streamed through the same shuffle buffer: the same
// batches, so the same outputs to the bit; the bundle has the regression signature.
TEST_F(RegressionTest, StreamedExamplesTrainAsTheTableDoes) {
  TrainConfig c = Config("huber");
  c.epochs = 5;
  c.export_.dir = (dir_ / "export").string();
  const auto [a, b] = MemoryAndStreaming(c, 300, 50, 1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->steps, b->steps);
  EXPECT_EQ(a->test_probabilities, b->test_probabilities);
  EXPECT_EQ(a->train_mse, b->train_mse);
  StatusOr<Model> bundle = ReadBundle(b->export_path);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  const Signature* regress = nullptr;
  for (const Signature& s : bundle->graph.signatures) {
    if (s.name == kRegressionSignature) regress = &s;
  }
  ASSERT_NE(regress, nullptr);
  EXPECT_EQ(regress->method_name, "tensorflow/serving/regress");
  ASSERT_EQ(regress->inputs.size(), 1u);
  EXPECT_EQ(regress->inputs[0].key, "x");
  EXPECT_EQ(regress->inputs[0].shape, (Shape{-1, 2}));
  ASSERT_EQ(regress->outputs.size(), 1u);
  EXPECT_EQ(regress->outputs[0].key, "outputs");
}

// A key of two target values, shuffled in memory and through the streaming buffer: the
// same outputs to the bit (each row's targets travel with it), and both fit the function.
// A held-out file whose targets differ is refused.
TEST_F(RegressionTest, TwoTargetValuesTravelWithTheirRows) {
  TrainConfig c = Config("mean_squared_error", 2);
  const auto [a, b] = MemoryAndStreaming(c, 400, 60, 2);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->test_probabilities, b->test_probabilities);
  EXPECT_EQ(b->test_probabilities.size(), 2u * 60);
  EXPECT_LT(b->test_mae, 0.15);

  TrainConfig mismatched = c;
  mismatched.data.format = "tfrecord";
  mismatched.data.features = {"x"};
  mismatched.data.train = {(dir_ / "train.tfrecord").string()};
  mismatched.data.test = {LinearExamples("one.tfrecord", 10)};
  StatusOr<TrainReport> refused = Train(mismatched, "line");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "data.test: the files must have the training data's targets");
}

// export.best_by val_mae exports the epoch of the lowest validation error: no worse there
// than the last epoch's weights.
TEST_F(RegressionTest, BestByValidationErrorExportsTheBestEpoch) {
  TrainConfig c = Config("mean_absolute_error");
  c.data.train = {LinearCsv("train.csv", 120)};
  c.data.validation = {LinearCsv("validation.csv", 40)};
  c.optimizer.learning_rate = 0.05;  // large enough to wander from epoch to epoch
  StatusOr<TrainReport> last = Train(c, "line");
  c.export_.best_by = "val_mae";
  StatusOr<TrainReport> best = Train(c, "line");
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_LE(best->validation_mae, last->validation_mae);
  EXPECT_EQ(best->steps, last->steps);
}

// A config built in code must say its task as the file does.
TEST_F(RegressionTest, TargetsWithoutTheTaskAreRefused) {
  TrainConfig c = Config("mean_squared_error");
  c.data.train = {LinearCsv("train.csv", 20)};
  c.task = "classification";
  c.loss = "softmax_cross_entropy";
  StatusOr<TrainReport> r = Train(c, "line");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "data.targets: are for task regression only");
}

TEST_F(RegressionTest, ABadTargetIsNamedByRecordInEitherMode) {
  for (const char* mode : {"memory", "streaming"}) {
    TrainConfig c = Config("mean_squared_error");
    c.data.format = "tfrecord";
    c.data.features = {"x"};
    c.data.train = {LinearExamples("train.tfrecord", 40, 1, 17)};
    c.data.mode = mode;
    StatusOr<TrainReport> r = Train(c, "line");
    ASSERT_FALSE(r.ok()) << mode;
    EXPECT_NE(r.status().message().find("train.tfrecord: record at offset"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("target 'y' is nan, not a finite number"), std::string::npos)
        << r.status().message();
  }
  TrainConfig c = Config("mean_squared_error");
  c.data.train = {Write("bad.csv", "a,b,y\n1,2,3\n4,5,\n")};
  for (const char* mode : {"memory", "streaming"}) {
    c.data.mode = mode;
    StatusOr<TrainReport> r = Train(c, "line");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("bad.csv:3: column 'y': '' is not a finite number"), std::string::npos)
        << mode << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace lockstep::training
