#include "training/config.h"
#include "training/model_graph.h"

#include <gtest/gtest.h>

namespace lockstep::training {
namespace {

const std::string kMinimal =
    R"({"data": {"train": "d.csv"}, "model": {"layers": [{"type": "dense", "units": 10, "activation": "softmax"}]}})";

// kMinimal with `extra` added at the top level (a leading comma included by the caller).
std::string With(const std::string& extra) {
  return kMinimal.substr(0, kMinimal.size() - 1) + extra + "}";
}

std::string ErrorOf(const std::string& json) {
  StatusOr<TrainConfig> c = ParseTrainConfig(json, "t.json");
  EXPECT_FALSE(c.ok()) << json;
  return c.ok() ? "" : c.status().message();
}

TEST(TrainConfigTest, MinimalConfigTakesTheDefaults) {
  StatusOr<TrainConfig> parsed = ParseTrainConfig(kMinimal, "t.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const TrainConfig& c = parsed.value();
  EXPECT_EQ(c.data.train, (std::vector<std::string>{"d.csv"}));
  EXPECT_EQ(c.data.format, "csv");
  EXPECT_EQ(c.data.label, "label");
  EXPECT_DOUBLE_EQ(c.data.test_fraction, 0.2);
  ASSERT_EQ(c.model.layers.size(), 1u);
  EXPECT_EQ(c.model.layers[0].units, 10);
  EXPECT_TRUE(c.model.normalize);
  EXPECT_EQ(c.loss, "softmax_cross_entropy");
  EXPECT_EQ(c.optimizer.type, "adam");
  EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 0.001);
  EXPECT_EQ(c.epochs, 10);
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_TRUE(c.checkpoint.dir.empty());
}

TEST(TrainConfigTest, EveryFieldIsRead) {
  const std::string json = R"({
    "data": {"format": "tfrecord", "train": ["a.tfrecord", "b.tfrecord"], "validation": "v.tfrecord",
             "label": "y", "features": ["pixels"], "split": {"validation": 0.1, "test": 0.25, "seed": 9},
             "skip_corrupt_records": true, "shuffle_buffer": 500, "prefetch": 4, "threads": 2,
             "augment": {"crop_padding": 2, "horizontal_flip": true}},
    "model": {"input_shape": [8, 8, 1], "normalize": false, "layers": [
      {"type": "conv2d", "filters": 32, "kernel_size": 3, "strides": 1, "padding": "same", "activation": "relu",
       "initializer": "he_uniform"},
      {"type": "max_pool2d", "pool_size": 2},
      {"type": "flatten"},
      {"type": "dropout", "rate": 0.25},
      {"type": "dense", "units": 10, "activation": "softmax"}]},
    "loss": "softmax_cross_entropy", "label_smoothing": 0.1,
    "optimizer": {"type": "momentum", "learning_rate": 0.1, "momentum": 0.8, "nesterov": true,
                  "weight_decay": 0.0001, "clip_global_norm": 5,
                  "schedule": {"type": "cosine", "warmup_steps": 100, "min_learning_rate": 0.001}},
    "epochs": 3, "batch_size": 64, "drop_remainder": true, "seed": 12345678901234,
    "checkpoint": {"dir": "ck", "every_steps": 50, "keep": 2},
    "export": {"dir": "out", "best_by": "val_accuracy", "model_name": "m"},
    "logdir": "logs"
  })";
  StatusOr<TrainConfig> parsed = ParseTrainConfig(json, "t.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const TrainConfig& c = parsed.value();
  EXPECT_EQ(c.data.train.size(), 2u);
  EXPECT_EQ(c.data.validation, (std::vector<std::string>{"v.tfrecord"}));
  EXPECT_EQ(c.data.augment_crop_padding, 2);
  EXPECT_TRUE(c.data.augment_horizontal_flip);
  EXPECT_EQ(c.label_smoothing, 0.1);
  EXPECT_EQ(c.data.split_seed, 9u);
  EXPECT_TRUE(c.data.skip_corrupt_records);
  EXPECT_EQ(c.data.threads, 2);
  EXPECT_EQ(c.model.input_shape, (std::vector<int64_t>{8, 8, 1}));
  EXPECT_EQ(c.model.layers[0].padding, "same");
  EXPECT_EQ(c.model.layers[0].initializer, "he_uniform");
  EXPECT_EQ(c.model.layers[1].strides, 2) << "a pool's stride defaults to its size";
  EXPECT_DOUBLE_EQ(c.model.layers[3].rate, 0.25);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_EQ(c.optimizer.schedule.type, "cosine");
  EXPECT_EQ(c.optimizer.schedule.warmup_steps, 100);
  EXPECT_EQ(c.seed, 12345678901234u);
  EXPECT_EQ(c.checkpoint.keep, 2);
  EXPECT_EQ(c.export_.best_by, "val_accuracy");
  EXPECT_EQ(c.logdir, "logs");

  // Written out in full (as a bundle's metadata records it), it reads back the same.
  StatusOr<TrainConfig> again = ParseTrainConfig(TrainConfigToJson(c), "metadata");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again.value() == c) << TrainConfigToJson(c);
}

TEST(TrainConfigTest, TyposAreNamedWithASuggestion) {
  EXPECT_EQ(
      ErrorOf(With(R"(, "optimzer": {})")),
      "t.json: optimzer: unknown key (did you mean 'optimizer'?); known keys: data, model, task, loss, "
      "huber_delta, label_smoothing, optimizer, epochs, batch_size, drop_remainder, seed, replicas, precision, "
      "checkpoint, export, logdir");
  EXPECT_EQ(ErrorOf(With(R"(, "optimizer": {"learnig_rate": 0.1})")).substr(0, 77),
            "t.json: optimizer.learnig_rate: unknown key (did you mean 'learning_rate'?); ");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv"}, "model": {"layers": [{"type": "dense", "unit": 3}]}})")
                .substr(0, 62),
            "t.json: model.layers[0].unit: unknown key (did you mean 'units");
}

TEST(TrainConfigTest, BadValuesAreNamed) {
  EXPECT_EQ(ErrorOf(With(R"(, "optimizer": {"learning_rate": -1})")),
            "t.json: optimizer.learning_rate: must be > 0, got -1");
  EXPECT_EQ(ErrorOf(With(R"(, "epochs": 2.5)")), "t.json: epochs: must be an integer, got 2.5");
  EXPECT_EQ(ErrorOf(With(R"(, "epochs": 0)")), "t.json: epochs: must be >= 1, got 0");
  EXPECT_EQ(ErrorOf(With(R"(, "seed": -1)")), "t.json: seed: must be a non-negative integer, got -1");
  EXPECT_EQ(
      ErrorOf(With(R"(, "loss": "hinge")")),
      "t.json: loss: must be one of softmax_cross_entropy, sigmoid_cross_entropy, mean_squared_error, "
      "mean_absolute_error, huber, got "
      "\"hinge\"");
  EXPECT_EQ(ErrorOf(With(R"(, "optimizer": {"schedule": {"gamma": 2}})")),
            "t.json: optimizer.schedule.gamma: must be > 0 and <= 1, got 2");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv"}, "model": {"layers": [{"type": "dense"}]}})"),
            "t.json: model.layers[0].units: is required for a dense layer");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv"}, "model": {"layers": [{"type": "dropout", "rate": 1}]}})"),
            "t.json: model.layers[0].rate: must be below 1, got 1");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv"}, "model": {"layers": [{"type": "pool"}]}})").substr(0, 48),
            "t.json: model.layers[0].type: must be one of den");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv"}, "model": {"layers": []}})"),
            "t.json: model.layers: must be a non-empty list of layers");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": 3}, "model": {}})"),
            "t.json: data.train: must be a string or a list of strings, got 3");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv", "features": ["a", "b", "a"]}, "model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data.features: 'a' is listed twice");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv", "features": ["label"]}, "model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data.features: 'label' is the label, not a feature");
}

TEST(TrainConfigTest, MissingAndInconsistentSettings) {
  EXPECT_EQ(ErrorOf(R"({"model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data: is required: the training data");
  EXPECT_EQ(ErrorOf(R"({"data": {}, "model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data.train: is required: the training data file(s)");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d.csv"}})"), "t.json: model: is required: the model's layers");
  EXPECT_EQ(
      ErrorOf(
          R"({"data": {"train": "d", "format": "tfrecord"}, "model": {"layers": [{"type": "flatten"}]}})"),
      "t.json: data.features: is required for tfrecord data: the feature keys, in order");
  EXPECT_EQ(ErrorOf(With(R"(, "export": {"best_by": "val_loss"})")),
            "t.json: export.best_by: needs validation data (data.validation or data.split.validation)");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d", "split": {"validation": 0.5, "test": 0.5}},
                       "model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data.split: validation and test fractions leave no training rows");
  EXPECT_EQ(ErrorOf("[1, 2]"), "t.json: the config must be a JSON object");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d", "augment": {"horizontal_flip": true}}, "model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data.augment: needs model.input_shape of an image, [height, width, channels]");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d", "augment": {"crop_padding": 8}},
                       "model": {"input_shape": [8, 9, 1], "layers": [{"type": "flatten"}]}})"),
            "t.json: data.augment: crop_padding 8 must be below the image's height and width");
  EXPECT_EQ(ErrorOf(R"({"data": {"train": "d", "augment": {"flip": true}}, "model": {"layers": [{"type": "flatten"}]}})"),
            "t.json: data.augment.flip: unknown key; known keys: crop_padding, horizontal_flip");
  EXPECT_EQ(ErrorOf(With(R"(, "label_smoothing": 1)")), "t.json: label_smoothing: must be below 1, got 1");
  EXPECT_EQ(ErrorOf(With(R"(, "loss": "mean_squared_error", "label_smoothing": 0.1)")),
            "t.json: label_smoothing: is for the cross-entropy losses only, and the loss is mean_squared_error");
}

TEST(TrainConfigTest, InvalidJsonNamesTheLine) {
  const std::string message = ErrorOf("{\n  \"data\": {\n    \"train\": \"d.csv\",\n  }\n}");
  EXPECT_EQ(message.substr(0, 27), "t.json:4: not valid JSON: [") << message;
}

TEST(TrainConfigTest, TheExampleConfigsParse) {
  for (const char* name : {"config/train/digits.json", "config/train/digits_cnn.json", "config/train/digits_residual.json",
                           "config/train/digits_vit.json", "config/train/digits_resnet.json",
                           "examples/fashion_mnist/mlp.json", "examples/fashion_mnist/cnn.json",
                           "examples/fashion_mnist/vit.json", "examples/fashion_mnist/resnet.json"}) {
    StatusOr<TrainConfig> c = LoadTrainConfig(std::string(LOCKSTEP_SOURCE_DIR) + "/" + name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    StatusOr<TrainConfig> again = ParseTrainConfig(TrainConfigToJson(c.value()), "metadata");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(again.value() == c.value()) << name;
    if (std::string(name).starts_with("examples/fashion_mnist/")) {  // their models fit 28x28 images of 10 classes
      DataSchema images;
      images.feature_keys = {{"pixels", 784}};
      for (int k = 0; k < 10; ++k) images.class_names.push_back(std::to_string(k));
      StatusOr<ModelLayout> layout = PlanModel(c.value(), images);
      EXPECT_TRUE(layout.ok()) << name << ": " << layout.status().ToString();
    }
  }
  StatusOr<TrainConfig> missing = LoadTrainConfig("/nonexistent.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep::training
