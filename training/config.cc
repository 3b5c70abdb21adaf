#include "training/config.h"

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

using Json = nlohmann::json;

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Shown(const Json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// Reads one JSON object of the config: each Get takes a known key (absent: the default stays),
// Finish rejects the keys nobody asked for. The first error is kept in *error; later calls
// do nothing once there is one.
class Fields {
 public:
  Fields(const Json* object, std::string path, std::string_view source, Status* error)
      : object_(object), path_(std::move(path)), source_(source), error_(error) {
    if (object_ != nullptr && !object_->is_object()) {
      Fail(path_.empty() ? "the config must be a JSON object" : "must be an object, got " + Shown(*object_),
           "");
      object_ = nullptr;
    }
  }

  void Get(std::string_view key, std::string& out, std::initializer_list<std::string_view> allowed = {}) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail("must be a string, got " + Shown(*v), key);
    const std::string s = v->get<std::string>();
    if (allowed.size() > 0 && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed)
        list += (list.empty() ? "" : ", ") + std::string(a.empty() ? "\"\"" : a);
      return Fail("must be one of " + list + ", got \"" + s + "\"", key);
    }
    out = s;
  }

  void Get(std::string_view key, int64_t& out, int64_t min,
           int64_t max = std::numeric_limits<int64_t>::max()) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Fail("must be an integer, got " + Shown(*v), key);
    const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max);
    const int64_t x = too_big ? max : v->get<int64_t>();
    if (too_big || x < min || x > max) {
      return Fail(Range(static_cast<double>(min), static_cast<double>(max), false) + ", got " + Shown(*v),
                  key);
    }
    out = x;
  }

  void Get(std::string_view key, int& out, int min, int max) {
    int64_t x = out;
    Get(key, x, min, max);
    out = static_cast<int>(x);
  }

  void Get(std::string_view key, uint64_t& out) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0)) {
      return Fail("must be a non-negative integer, got " + Shown(*v), key);
    }
    out = v->get<uint64_t>();
  }

  // In [min, max], or (min, max] when min_exclusive.
  void Get(std::string_view key, double& out, double min, double max, bool min_exclusive = false) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail("must be a number, got " + Shown(*v), key);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < min || x > max || (min_exclusive && x == min)) {
      return Fail(Range(min, max, min_exclusive) + ", got " + Shown(*v), key);
    }
    out = x;
  }

  void Get(std::string_view key, bool& out) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail("must be true or false, got " + Shown(*v), key);
    out = v->get<bool>();
  }

  // A list of strings; a single string counts as a list of one.
  void Get(std::string_view key, std::vector<std::string>& out) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (v->is_string()) {
      out = {v->get<std::string>()};
      return;
    }
    if (!v->is_array()) return Fail("must be a string or a list of strings, got " + Shown(*v), key);
    std::vector<std::string> list;
    for (const Json& item : *v) {
      if (!item.is_string()) return Fail("must be a list of strings, got " + Shown(item) + " in it", key);
      list.push_back(item.get<std::string>());
    }
    out = std::move(list);
  }

  void Get(std::string_view key, std::vector<int64_t>& out, int64_t min) {
    const Json* v = Take(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail("must be a list of integers, got " + Shown(*v), key);
    std::vector<int64_t> list;
    for (const Json& item : *v) {
      if (!item.is_number_integer() || item.get<int64_t>() < min) {
        return Fail(
            "must be a list of integers >= " + std::to_string(min) + ", got " + Shown(item) + " in it", key);
      }
      list.push_back(item.get<int64_t>());
    }
    out = std::move(list);
  }

  // A nested value (object or array) for the caller to read, or null when absent.
  const Json* Nested(std::string_view key) { return Take(key); }

  std::string PathOf(std::string_view key) const {
    if (key.empty()) return path_;
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  void Finish() {
    if (object_ == nullptr || !error_->ok()) return;
    for (const auto& [key, value] : object_->items()) {
      if (known_.count(key) != 0) continue;
      std::string hint;
      size_t best = 3;  // suggest only close misspellings
      for (const std::string& k : known_asked_) {
        const size_t d = EditDistance(key, k);
        if (d < best) {
          best = d;
          hint = " (did you mean '" + k + "'?)";
        }
      }
      std::string list;
      for (const std::string& k : known_asked_) list += (list.empty() ? "" : ", ") + k;
      return Fail("unknown key" + hint + "; known keys: " + list, key);
    }
  }

  void Fail(const std::string& message, std::string_view key) {
    if (!error_->ok()) return;
    const std::string where = key.empty() && path_.empty() ? "" : PathOf(key) + ": ";
    *error_ = InvalidArgument(std::string(source_) + ": " + where + message);
  }

 private:
  const Json* Take(std::string_view key) {
    known_.insert(std::string(key));
    known_asked_.push_back(std::string(key));
    if (object_ == nullptr || !error_->ok()) return nullptr;
    auto it = object_->find(key);
    if (it == object_->end() || it->is_null()) return nullptr;
    return &*it;
  }

  static std::string Range(double min, double max, bool min_exclusive) {
    auto show = [](double x) {
      std::ostringstream s;
      s << x;
      return s.str();
    };
    const bool unbounded = max >= static_cast<double>(std::numeric_limits<int64_t>::max()) ||
                           max == std::numeric_limits<double>::infinity();
    const std::string low = (min_exclusive ? "> " : ">= ") + show(min);
    return unbounded ? "must be " + low : "must be " + low + " and <= " + show(max);
  }

  const Json* object_;
  std::string path_;
  std::string_view source_;
  Status* error_;
  std::set<std::string> known_;
  std::vector<std::string> known_asked_;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

void ReadData(const Json* json, std::string_view source, bool regression, Status* error, DataConfig& d) {
  Fields f(json, "data", source, error);
  f.Get("format", d.format, {"csv", "tfrecord"});
  f.Get("train", d.train);
  f.Get("validation", d.validation);
  f.Get("test", d.test);
  f.Get("label", d.label);
  f.Get("targets", d.targets);
  f.Get("features", d.features);
  Fields split(f.Nested("split"), f.PathOf("split"), source, error);
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
  f.Finish();
  if (!error->ok()) return;
  if (d.train.empty()) return f.Fail("is required: the training data file(s)", "train");
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
  Fields f(&json, path, source, error);
  f.Get("type", l.type,
        {"dense", "conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool", "global_max_pool", "flatten", "dropout",
         "embedding", "layer_norm", "activation", "add", "multiply", "concat"});
  f.Get("name", l.name);
  f.Get("inputs", l.inputs);
  if (!error->ok()) return;
  if (l.type.empty()) return f.Fail("is required", "type");
  const std::initializer_list<std::string_view> activations = {
      "", "relu", "gelu", "sigmoid", "tanh", "softmax", "swish", "silu", "hard_swish", "leaky_relu"};
  const std::initializer_list<std::string_view> initializers = {"", "glorot_uniform", "he_uniform", "zeros"};
  if (l.type == "dense") {
    f.Get("units", l.units, 1);
    f.Get("activation", l.activation, activations);
    f.Get("initializer", l.initializer, initializers);
  } else if (l.type == "conv2d") {
    f.Get("filters", l.filters, 1);
    f.Get("kernel_size", l.kernel_size, 1, 64);
    f.Get("strides", l.strides, 1, 64);
    f.Get("padding", l.padding, {"valid", "same"});
    f.Get("activation", l.activation, activations);
    f.Get("initializer", l.initializer, initializers);
  } else if (l.type == "max_pool2d" || l.type == "avg_pool2d") {
    f.Get("pool_size", l.pool_size, 1, 64);
    l.strides = l.pool_size;
    f.Get("strides", l.strides, 1, 64);
    f.Get("padding", l.padding, {"valid", "same"});
  } else if (l.type == "dropout") {
    f.Get("rate", l.rate, 0.0, 1.0);
  } else if (l.type == "embedding") {
    f.Get("vocabulary", l.vocabulary, 1);
    f.Get("dimension", l.dimension, 1);
  } else if (l.type == "layer_norm") {
    f.Get("epsilon", l.epsilon, 0.0, 1.0, true);
  } else if (l.type == "activation") {
    f.Get("activation", l.activation, activations);
  } else if (l.type == "concat") {
    f.Get("axis", l.axis, -8, 8);
  }
  if (l.activation == "silu") l.activation = "swish";  // one function, two names
  // Unknown keys first: a misspelt required key is better reported as the misspelling.
  f.Finish();
  if (!error->ok()) return;
  if (l.type == "dense" && l.units == 0) return f.Fail("is required for a dense layer", "units");
  if (l.type == "conv2d" && l.filters == 0) return f.Fail("is required for a conv2d layer", "filters");
  if (l.type == "dropout" && l.rate >= 1.0) return f.Fail("must be below 1, got 1", "rate");
  if (l.type == "embedding" && (l.vocabulary == 0 || l.dimension == 0)) {
    return f.Fail("is required for an embedding layer", l.vocabulary == 0 ? "vocabulary" : "dimension");
  }
  if (l.type == "activation" && l.activation.empty())
    return f.Fail("is required for an activation layer", "activation");
  if (l.name == "input") return f.Fail("'input' names the model's input; choose another name", "name");
  const bool merge = l.type == "add" || l.type == "multiply" || l.type == "concat";
  if (merge && l.inputs.size() < 2) return f.Fail("must name at least two layers for a " + l.type + " layer", "inputs");
  if (!merge && l.inputs.size() > 1) {
    return f.Fail("names " + std::to_string(l.inputs.size()) + " layers, but a " + l.type + " layer takes one",
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
  return wiring;
}

namespace {

void ReadModel(const Json* json, std::string_view source, Status* error, ModelConfig& m) {
  Fields f(json, "model", source, error);
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
  Fields f(json, "optimizer", source, error);
  f.Get("type", o.type, {"sgd", "momentum", "adam", "adamw"});
  f.Get("learning_rate", o.learning_rate, 0.0, kInf, true);
  f.Get("momentum", o.momentum, 0.0, 1.0);
  f.Get("nesterov", o.nesterov);
  f.Get("beta1", o.beta1, 0.0, 1.0);
  f.Get("beta2", o.beta2, 0.0, 1.0);
  f.Get("epsilon", o.epsilon, 0.0, 1.0, true);
  f.Get("weight_decay", o.weight_decay, 0.0, kInf);
  f.Get("clip_global_norm", o.clip_global_norm, 0.0, kInf);
  Fields s(f.Nested("schedule"), f.PathOf("schedule"), source, error);
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
  Fields top(&json, "", source, &error);
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
  ReadOptimizer(top.Nested("optimizer"), source, &error, c.optimizer);
  top.Get("epochs", c.epochs, 1);
  top.Get("batch_size", c.batch_size, 1);
  top.Get("drop_remainder", c.drop_remainder);
  top.Get("seed", c.seed);
  top.Get("replicas", c.replicas, 0, 256);
  top.Get("precision", c.precision, {"float32", "bfloat16"});
  Fields ck(top.Nested("checkpoint"), "checkpoint", source, &error);
  ck.Get("dir", c.checkpoint.dir);
  ck.Get("every_steps", c.checkpoint.every_steps, 0);
  ck.Get("keep", c.checkpoint.keep, 1, 1000);
  ck.Finish();
  Fields ex(top.Nested("export"), "export", source, &error);
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
               {"stats_sample", d.stats_sample}};
  // A regression config's label that is not a target is not read: writing it would be refused.
  if (d.targets.empty() || std::find(d.targets.begin(), d.targets.end(), d.label) != d.targets.end()) {
    data["label"] = d.label;
  }
  Json layers = Json::array();
  for (const LayerConfig& l : c.model.layers) {
    Json layer = {{"type", l.type}};
    if (!l.name.empty()) layer["name"] = l.name;
    if (!l.inputs.empty()) layer["inputs"] = l.inputs;
    if (l.type == "dense") {
      layer.update({{"units", l.units}, {"activation", l.activation}, {"initializer", l.initializer}});
    } else if (l.type == "conv2d") {
      layer.update({{"filters", l.filters},
                    {"kernel_size", l.kernel_size},
                    {"strides", l.strides},
                    {"padding", l.padding},
                    {"activation", l.activation},
                    {"initializer", l.initializer}});
    } else if (l.type == "max_pool2d" || l.type == "avg_pool2d") {
      layer.update({{"pool_size", l.pool_size}, {"strides", l.strides}, {"padding", l.padding}});
    } else if (l.type == "dropout") {
      layer["rate"] = l.rate;
    } else if (l.type == "embedding") {
      layer.update({{"vocabulary", l.vocabulary}, {"dimension", l.dimension}});
    } else if (l.type == "layer_norm") {
      layer["epsilon"] = l.epsilon;
    } else if (l.type == "activation") {
      layer["activation"] = l.activation;
    } else if (l.type == "concat") {
      layer["axis"] = l.axis;
    }
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
