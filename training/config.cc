#include "training/config.h"

#include "training/config_fields.h"
#include "training/layers/layer_kind.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace lockstep::training {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void ReadData(const Json* json, std::string_view source, bool regression, Status* error, DataConfig& d) {
  ConfigFields f(json, "data", source, error);
  f.Get("format", d.format, {"csv", "tfrecord", "prediction_log"});
  f.Get("train", d.train);
  f.Get("validation", d.validation);
  f.Get("test", d.test);
  f.Get("label", d.label);
  f.Get("targets", d.targets);
  f.Get("features", d.features);
  ConfigFields split(f.Nested("split"), f.PathOf("split"), source, error);
  split.Get("validation", d.validation_fraction, 0.0, 1.0);
  split.Get("test", d.test_fraction, 0.0, 1.0);
  split.Get("seed", d.split_seed);
  split.Finish();
  f.Get("skip_corrupt_records", d.skip_corrupt_records);
  f.Get("shuffle_buffer", d.shuffle_buffer, 0);
  f.Get("prefetch", d.prefetch, 0, 64);
  f.Get("threads", d.threads, 1, 64);
  f.Get("mode", d.mode, {"auto", "memory", "streaming"});
  f.Get("streaming_threshold_mb", d.streaming_threshold_mb, 0);
  f.Get("compression", d.compression, {"auto", "none", "gzip"});
  f.Get("interleave", d.interleave, 1, 1024);
  f.Get("shards", d.shards, 0, 4096);
  f.Get("stats_sample", d.stats_sample, 0);
  ConfigFields augment(f.Nested("augment"), f.PathOf("augment"), source, error);
  augment.Get("crop_padding", d.augment_crop_padding, 0, 64);
  augment.Get("horizontal_flip", d.augment_horizontal_flip);
  augment.Finish();
  f.Get("labels", d.labels);
  f.Get("input", d.input);
  ConfigFields original(f.Nested("original"), f.PathOf("original"), source, error);
  original.Get("format", d.original_format, {"csv", "tfrecord"});
  original.Get("files", d.original);
  original.Finish();
  f.Finish();
  if (!error->ok()) return;
  if (d.train.empty()) return f.Fail("is required: the training data file(s)", "train");
  if (d.format == "prediction_log") {
    if (d.labels.empty()) return f.Fail("is required for prediction_log data: the labels CSV, by request id", "labels");
    if (!d.validation.empty() || !d.test.empty()) {
      return f.Fail("prediction_log data is split by data.split, not given as files",
                    d.validation.empty() ? "test" : "validation");
    }
    if (d.mode == "streaming") return f.Fail("prediction_log data is read into memory", "mode");
    if (d.original_format == "tfrecord" && !d.original.empty() && d.features.empty()) {
      return f.Fail("is required for tfrecord data: the feature keys, in order", "features");
    }
  } else {
    for (const auto& [name, set] : {std::pair<const char*, bool>{"labels", !d.labels.empty()},
                                    {"input", !d.input.empty()}, {"original", !d.original.empty()}}) {
      if (set) return f.Fail("is for prediction_log data only", name);
    }
  }
  if (d.format == "tfrecord" && d.features.empty()) {
    return f.Fail("is required for tfrecord data: the feature keys, in order", "features");
  }
  if (!d.targets.empty() && !regression) {
    return f.Fail("is for task regression only (set \"task\": \"regression\")", "targets");
  }
  // In regression data.label names the one target, when data.targets does not list them.
  if (!d.targets.empty() && json != nullptr && json->contains("label") &&
      std::find(d.targets.begin(), d.targets.end(), d.label) == d.targets.end()) {
    return f.Fail("'" + d.label + "' is not one of data.targets: give the one target as data.label, or several "
                  "as data.targets",
                  "label");
  }
  for (size_t i = 0; i < d.features.size(); ++i) {
    if (std::find(d.features.begin(), d.features.begin() + static_cast<std::ptrdiff_t>(i), d.features[i]) !=
        d.features.begin() + static_cast<std::ptrdiff_t>(i)) {
      return f.Fail("'" + d.features[i] + "' is listed twice", "features");
    }
    if (d.targets.empty() && d.features[i] == d.label) {
      return f.Fail("'" + d.label + "' is the label, not a feature", "features");
    }
    if (std::find(d.targets.begin(), d.targets.end(), d.features[i]) != d.targets.end()) {
      return f.Fail("'" + d.features[i] + "' is a target, not a feature", "features");
    }
  }
  for (size_t i = 0; i < d.targets.size(); ++i) {
    if (std::find(d.targets.begin(), d.targets.begin() + static_cast<std::ptrdiff_t>(i), d.targets[i]) !=
        d.targets.begin() + static_cast<std::ptrdiff_t>(i)) {
      return f.Fail("'" + d.targets[i] + "' is listed twice", "targets");
    }
  }
  const double held =
      (d.validation.empty() ? d.validation_fraction : 0.0) + (d.test.empty() ? d.test_fraction : 0.0);
  if (held >= 1.0) split.Fail("validation and test fractions leave no training rows", "");
  if (d.mode == "streaming" && held > 0) {
    return f.Fail(
        "is streaming, which reads the training files as they are and cannot split them: give "
        "data.validation and data.test files, or set data.split.validation and data.split.test to 0",
        "mode");
  }
}

void ReadLayer(const Json& json, const std::string& path, std::string_view source, Status* error,
               LayerConfig& l) {
  ConfigFields f(&json, path, source, error);
  f.Get("type", l.type, LayerTypeNames());
  f.Get("name", l.name);
  f.Get("inputs", l.inputs);
  if (!error->ok()) return;
  if (l.type.empty()) return f.Fail("is required", "type");
  const LayerKind& kind = *FindLayerKind(l.type);
  kind.read(f, l);
  if (l.activation == "silu") l.activation = "swish";  // one function, two names
  // Unknown keys first: a misspelt required key is better reported as the misspelling.
  f.Finish();
  if (!error->ok()) return;
  if (kind.check != nullptr) kind.check(f, l);
  if (l.name == "input") return f.Fail("'input' names the model's input; choose another name", "name");
  // The graphs' own nodes, and weights named "layer/...": a name must not be mistaken for either.
  static const std::set<std::string, std::less<>> kReserved = {
      "classes", "class_names", "classification", "dropout_seed", "feature_mean", "feature_std", "features",
      "gradients", "input_shape", "labels", "logits", "loss", "normalize", "outputs", "predictions",
      "probabilities", "regression", "targets", "x"};
  if (kReserved.count(l.name) != 0) return f.Fail("'" + l.name + "' names a node of the model's graphs; choose another name", "name");
  if (l.name.find('/') != std::string::npos) {
    return f.Fail("'" + l.name + "' has a '/', which separates a layer's name from its weights'", "name");
  }
  // No inputs: the layer before (one).
  const int count = l.inputs.empty() ? 1 : static_cast<int>(l.inputs.size());
  if (count < kind.min_inputs) {
    return f.Fail("must name at least " + std::to_string(kind.min_inputs) + " layers for " + ALayer(l.type), "inputs");
  }
  if (kind.max_inputs >= 0 && count > kind.max_inputs) {
    return f.Fail("names " + std::to_string(count) + " layers, but " + ALayer(l.type) + " takes " +
                      std::to_string(kind.max_inputs),
                  "inputs");
  }
}

}  // namespace

std::string LayerName(const ModelConfig& model, size_t i) {
  const LayerConfig& layer = model.layers[i];
  return layer.name.empty() ? layer.type + "_" + std::to_string(i) : layer.name;
}

StatusOr<std::vector<std::vector<int>>> LayerInputIndices(const ModelConfig& model) {
  std::map<std::string, int> earlier = {{"input", -1}};
  std::map<std::string, size_t> all;
  for (size_t i = 0; i < model.layers.size(); ++i) all.emplace(LayerName(model, i), i);
  std::vector<std::vector<int>> wiring;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const std::string path = "model.layers[" + std::to_string(i) + "]";
    const std::string name = LayerName(model, i);
    if (earlier.count(name) != 0) {
      return InvalidArgument(path + ".name: '" + name + "' names an earlier layer too");
    }
    std::vector<int> inputs;
    for (const std::string& in : model.layers[i].inputs) {
      auto it = earlier.find(in);
      if (it != earlier.end()) {
        inputs.push_back(it->second);
        continue;
      }
      if (auto later = all.find(in); later != all.end()) {
        return InvalidArgument(path + ".inputs: '" + in + "' is model.layers[" + std::to_string(later->second) +
                               "], not a layer before this one: a layer takes only earlier layers' outputs "
                               "(no cycles)");
      }
      return InvalidArgument(path + ".inputs: no layer is named '" + in + "' (\"input\" is the model's input)");
    }
    if (inputs.empty()) inputs.push_back(static_cast<int>(i) - 1);
    wiring.push_back(std::move(inputs));
    earlier.emplace(name, static_cast<int>(i));
  }
  // The model's output is the last layer's: any other layer must feed a later one.
  std::vector<bool> used(model.layers.size(), false);
  for (const std::vector<int>& inputs : wiring) {
    for (int j : inputs) {
      if (j >= 0) used[static_cast<size_t>(j)] = true;
    }
  }
  for (size_t i = 0; i + 1 < model.layers.size(); ++i) {
    if (!used[i]) {
      return InvalidArgument("model.layers[" + std::to_string(i) + "]: '" + LayerName(model, i) +
                             "' is the input of no later layer; the model's output is the last layer's");
    }
  }
  return wiring;
}

namespace {

void ReadModel(const Json* json, std::string_view source, Status* error, ModelConfig& m) {
  ConfigFields f(json, "model", source, error);
  f.Get("input_shape", m.input_shape, 1);
  f.Get("normalize", m.normalize);
  const Json* layers = f.Nested("layers");
  f.Finish();
  if (!error->ok()) return;
  if (layers == nullptr) return f.Fail("is required: the model's layers, input to output", "layers");
  if (!layers->is_array() || layers->empty()) return f.Fail("must be a non-empty list of layers", "layers");
  for (size_t i = 0; i < layers->size() && error->ok(); ++i) {
    LayerConfig layer;
    ReadLayer((*layers)[i], "model.layers[" + std::to_string(i) + "]", source, error, layer);
    m.layers.push_back(layer);
  }
  if (!error->ok()) return;
  if (StatusOr<std::vector<std::vector<int>>> wiring = LayerInputIndices(m); !wiring.ok()) {
    *error = InvalidArgument(std::string(source) + ": " + wiring.status().message());
  }
}

void ReadOptimizer(const Json* json, std::string_view source, Status* error, OptimizerConfig& o) {
  ConfigFields f(json, "optimizer", source, error);
  f.Get("type", o.type, {"sgd", "momentum", "adam", "adamw"});
  f.Get("learning_rate", o.learning_rate, 0.0, kInf, true);
  f.Get("momentum", o.momentum, 0.0, 1.0);
  f.Get("nesterov", o.nesterov);
  f.Get("beta1", o.beta1, 0.0, 1.0);
  f.Get("beta2", o.beta2, 0.0, 1.0);
  f.Get("epsilon", o.epsilon, 0.0, 1.0, true);
  f.Get("weight_decay", o.weight_decay, 0.0, kInf);
  f.Get("clip_global_norm", o.clip_global_norm, 0.0, kInf);
  ConfigFields s(f.Nested("schedule"), f.PathOf("schedule"), source, error);
  s.Get("type", o.schedule.type, {"constant", "step", "cosine"});
  s.Get("warmup_steps", o.schedule.warmup_steps, 0);
  s.Get("step_size", o.schedule.step_size, 1);
  s.Get("gamma", o.schedule.gamma, 0.0, 1.0, true);
  s.Get("min_learning_rate", o.schedule.min_learning_rate, 0.0, kInf);
  s.Finish();
  f.Finish();
}

}  // namespace

StatusOr<TrainConfig> ParseTrainConfig(std::string_view text, std::string_view source) {
  Json json;
  try {
    json = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann's message names the byte; say the line too.
    const size_t at = std::min(static_cast<size_t>(e.byte), text.size());
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at > 0 ? at - 1 : 0), '\n');
    return InvalidArgument(std::string(source) + ":" + std::to_string(line) +
                           ": not valid JSON: " + e.what());
  }
  Status error;
  TrainConfig c;
  ConfigFields top(&json, "", source, &error);
  if (error.ok() && !json.contains("data")) top.Fail("is required: the training data", "data");
  if (error.ok() && !json.contains("model")) top.Fail("is required: the model's layers", "model");
  // The task decides how data.label and data.targets are read.
  const bool regression = json.is_object() && json.contains("task") && json["task"] == "regression";
  ReadData(top.Nested("data"), source, regression, &error, c.data);
  ReadModel(top.Nested("model"), source, &error, c.model);
  top.Get("task", c.task, {"classification", "regression"});
  if (c.task == "regression") c.loss = "mean_squared_error";
  top.Get("loss", c.loss,
          {"softmax_cross_entropy", "sigmoid_cross_entropy", "mean_squared_error", "mean_absolute_error", "huber"});
  top.Get("huber_delta", c.huber_delta, 0.0, kInf, true);
  top.Get("label_smoothing", c.label_smoothing, 0.0, 1.0);
  ReadOptimizer(top.Nested("optimizer"), source, &error, c.optimizer);
  top.Get("epochs", c.epochs, 1);
  top.Get("batch_size", c.batch_size, 1);
  top.Get("drop_remainder", c.drop_remainder);
  top.Get("seed", c.seed);
  top.Get("replicas", c.replicas, 0, 256);
  top.Get("precision", c.precision, {"float32", "bfloat16"});
  ConfigFields ck(top.Nested("checkpoint"), "checkpoint", source, &error);
  ck.Get("dir", c.checkpoint.dir);
  ck.Get("every_steps", c.checkpoint.every_steps, 0);
  ck.Get("keep", c.checkpoint.keep, 1, 1000);
  ck.Finish();
  ConfigFields ex(top.Nested("export"), "export", source, &error);
  ex.Get("dir", c.export_.dir);
  ex.Get("best_by", c.export_.best_by, {"", "val_accuracy", "val_loss", "val_mae"});
  ex.Get("model_name", c.export_.model_name);
  ex.Finish();
  top.Get("logdir", c.logdir);
  top.Finish();
  if (!error.ok()) return error;
  if (json.contains("huber_delta") && c.loss != "huber") {
    top.Fail("is for loss huber only, and the loss is " + c.loss, "huber_delta");
    return error;
  }
  if (c.label_smoothing >= 1.0) {
    top.Fail("must be below 1, got " + Shown(json["label_smoothing"]), "label_smoothing");
    return error;
  }
  if (c.label_smoothing > 0 && c.loss != "softmax_cross_entropy" && c.loss != "sigmoid_cross_entropy") {
    top.Fail("is for the cross-entropy losses only, and the loss is " + c.loss, "label_smoothing");
    return error;
  }
  if (c.data.augment_crop_padding > 0 || c.data.augment_horizontal_flip) {
    const std::vector<int64_t>& image = c.model.input_shape;
    if (image.size() != 3) {
      top.Fail("needs model.input_shape of an image, [height, width, channels]", "data.augment");
      return error;
    }
    if (c.data.augment_crop_padding >= std::min(image[0], image[1])) {
      top.Fail("crop_padding " + std::to_string(c.data.augment_crop_padding) + " must be below the image's height and width",
               "data.augment");
      return error;
    }
  }
  if (c.regression()) {
    if (c.loss != "mean_squared_error" && c.loss != "mean_absolute_error" && c.loss != "huber") {
      top.Fail("'" + c.loss + "' is a classification loss; task regression takes mean_squared_error, "
               "mean_absolute_error or huber", "loss");
      return error;
    }
    if (c.export_.best_by == "val_accuracy") {
      ex.Fail("val_accuracy is a classification metric; task regression takes val_loss or val_mae", "best_by");
      return error;
    }
    if (c.data.targets.empty()) c.data.targets = {c.data.label};
  } else {
    if (c.loss == "mean_absolute_error" || c.loss == "huber") {
      top.Fail("'" + c.loss + "' is a regression loss: set \"task\": \"regression\"", "loss");
      return error;
    }
    if (c.export_.best_by == "val_mae") {
      ex.Fail("val_mae is a regression metric; task classification takes val_accuracy or val_loss", "best_by");
      return error;
    }
  }
  const bool has_validation = !c.data.validation.empty() || c.data.validation_fraction > 0;
  if (!c.export_.best_by.empty() && !has_validation) {
    ex.Fail("needs validation data (data.validation or data.split.validation)", "best_by");
    return error;
  }
  return c;
}

std::string TrainConfigToJson(const TrainConfig& c) {
  const DataConfig& d = c.data;
  Json data = {{"format", d.format},
               {"train", d.train},
               {"validation", d.validation},
               {"test", d.test},
               {"targets", d.targets},
               {"features", d.features},
               {"split", {{"validation", d.validation_fraction}, {"test", d.test_fraction}, {"seed", d.split_seed}}},
               {"skip_corrupt_records", d.skip_corrupt_records},
               {"shuffle_buffer", d.shuffle_buffer},
               {"prefetch", d.prefetch},
               {"threads", d.threads},
               {"mode", d.mode},
               {"streaming_threshold_mb", d.streaming_threshold_mb},
               {"compression", d.compression},
               {"interleave", d.interleave},
               {"shards", d.shards},
               {"augment", {{"crop_padding", d.augment_crop_padding}, {"horizontal_flip", d.augment_horizontal_flip}}},
               {"stats_sample", d.stats_sample}};
  if (d.format == "prediction_log") {
    data["labels"] = d.labels;
    data["input"] = d.input;
    data["original"] = {{"format", d.original_format}, {"files", d.original}};
  }
  // A regression config's label that is not a target is not read: writing it would be refused.
  if (d.targets.empty() || std::find(d.targets.begin(), d.targets.end(), d.label) != d.targets.end()) {
    data["label"] = d.label;
  }
  Json layers = Json::array();
  for (const LayerConfig& l : c.model.layers) {
    Json layer = {{"type", l.type}};
    if (!l.name.empty()) layer["name"] = l.name;
    if (!l.inputs.empty()) layer["inputs"] = l.inputs;
    FindLayerKind(l.type)->write(l, layer);
    layers.push_back(layer);
  }
  const OptimizerConfig& o = c.optimizer;
  Json optimizer = {{"type", o.type},
                    {"learning_rate", o.learning_rate},
                    {"momentum", o.momentum},
                    {"nesterov", o.nesterov},
                    {"beta1", o.beta1},
                    {"beta2", o.beta2},
                    {"epsilon", o.epsilon},
                    {"weight_decay", o.weight_decay},
                    {"clip_global_norm", o.clip_global_norm},
                    {"schedule",
                     {{"type", o.schedule.type},
                      {"warmup_steps", o.schedule.warmup_steps},
                      {"step_size", o.schedule.step_size},
                      {"gamma", o.schedule.gamma},
                      {"min_learning_rate", o.schedule.min_learning_rate}}}};
  Json model = {{"normalize", c.model.normalize}, {"layers", layers}};
  if (!c.model.input_shape.empty()) model["input_shape"] = c.model.input_shape;
  Json json = {{"data", data},
               {"model", model},
               {"task", c.task},
               {"loss", c.loss},
               {"optimizer", optimizer},
               {"epochs", c.epochs},
               {"batch_size", c.batch_size},
               {"drop_remainder", c.drop_remainder},
               {"seed", c.seed},
               {"replicas", c.replicas},
               {"precision", c.precision},
               {"checkpoint", {{"dir", c.checkpoint.dir}, {"every_steps", c.checkpoint.every_steps}, {"keep", c.checkpoint.keep}}},
               {"export", {{"dir", c.export_.dir}, {"best_by", c.export_.best_by}, {"model_name", c.export_.model_name}}},
               {"logdir", c.logdir}};
  if (c.loss == "huber") json["huber_delta"] = c.huber_delta;
  if (c.label_smoothing > 0) json["label_smoothing"] = c.label_smoothing;
  return json.dump();
}

StatusOr<TrainConfig> LoadTrainConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open config '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTrainConfig(text.str(), path);
}

}  // namespace lockstep::training
