// The layer types of model-train, one registry of them. A LayerKind is everything about one
// type: the keys of its config, its output shape and weights given its inputs' shapes, and the
// ops it adds to a graph. Each family of layers registers its types from a file of its own
// (dense_layers.cc, image_layers.cc, core_layers.cc, normalization_layers.cc,
// merge_layers.cc, transformer_layers.cc); config.cc reads and writes layers through the registry, and
// model_graph.cc plans and builds them, without naming a type.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/graph_builder.h"
#include "runtime/status.h"
#include "training/config.h"
#include "training/config_fields.h"
#include "training/layers/weight_nodes.h"
#include "training/model_graph.h"

namespace lockstep::training {

// What planning a layer sees.
struct LayerPlan {
  const TrainConfig& config;
  const LayerConfig& layer;
  size_t index = 0;
  std::string name;  // the layer's name (LayerName): its weights are "name/..."
  std::string path;  // "model.layers[i]", for messages
  std::vector<std::vector<int64_t>> inputs = {};  // one example's shape, per input
  std::vector<int> sources = {};  // per input, the layer it comes from (-1: the model's input)
};

struct PlannedLayer {
  std::vector<int64_t> shape = {};  // the output's, for one example
  std::vector<WeightInfo> weights = {};
  std::vector<StateInfo> state = {};
  bool takes_dropout_seed = false;  // the training graph must take kDropoutSeedInput
};

// What building a layer's ops sees. Its activation (LayerConfig::activation) is applied by
// the caller, after.
struct LayerGraph {
  GraphBuilder& g;
  const LayerConfig& layer;
  size_t index = 0;
  std::string name;  // the layer's name: its weights' prefix
  std::string node;  // its nodes' prefix: the graph's prefix and the name
  std::vector<std::string> inputs = {};
  std::vector<std::vector<int64_t>> input_shapes = {};  // one example's
  WeightNodes& weights;
  std::string dropout_seed;  // "" where dropout is left out (serving, evaluation)
  // The serving graph (and evaluation): batch_norm's moving averages, folded (batch_norm_fold.h).
  bool serving = false;
  // The training graph: where a layer with state (StateInfo) adds the node of each batch
  // statistic, by the state's name.
  std::vector<std::pair<std::string, std::string>>* state_outputs = nullptr;
};

struct LayerKind {
  std::string_view type;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: any number
  // Reads the type's own keys (type, name and inputs are read for every layer).
  void (*read)(ConfigFields& fields, LayerConfig& layer) = nullptr;
  // Once every key is read: what is missing or inconsistent, failed through `fields`. May be null.
  void (*check)(ConfigFields& fields, const LayerConfig& layer) = nullptr;
  // Writes what `read` reads, so that reading it back gives an equal LayerConfig.
  void (*write)(const LayerConfig& layer, Json& out) = nullptr;
  // Fails, naming p.path, for inputs it cannot take.
  StatusOr<PlannedLayer> (*plan)(const LayerPlan& p) = nullptr;
  // Adds the layer's ops; returns its output.
  std::string (*build)(const LayerGraph& b) = nullptr;
};

// The kind of `type`, or null.
const LayerKind* FindLayerKind(std::string_view type);
// Every type, in the order the documentation lists them.
const std::vector<std::string_view>& LayerTypeNames();

// "[6,6,4]", for messages.
std::string ShapeString(const std::vector<int64_t>& dims);
// "a dense layer", "an add layer", for messages.
std::string ALayer(std::string_view type);
// The layer's initializer, or `fallback` when the config gives none.
std::string InitializerOr(const LayerConfig& layer, const char* fallback);
// The initializers a config may name ("" for the layer's default).
inline const std::initializer_list<std::string_view> kInitializerNames = {"", "glorot_uniform", "he_uniform",
                                                                          "zeros"};

// The op of an activation name ("" for none), and every name a config may give.
std::string ActivationOp(const std::string& activation);
const std::vector<std::string_view>& ActivationNames();

// Each family's types, appended to `kinds` (layer_kinds.cc calls them).
void AddDenseLayers(std::vector<LayerKind>& kinds);
void AddImageLayers(std::vector<LayerKind>& kinds);
void AddCoreLayers(std::vector<LayerKind>& kinds);
void AddNormalizationLayers(std::vector<LayerKind>& kinds);
void AddMergeLayers(std::vector<LayerKind>& kinds);
void AddTransformerLayers(std::vector<LayerKind>& kinds);

}  // namespace lockstep::training
