// model-train's configuration: what to train on, which model, how, and where the results go.
// Written as JSON (schema and examples: training/CONFIG.md). Every field but data.train has a
// default, so a short config works; an unknown key or a bad value is an error naming the
// file and the field ("digits.json: optimizer.learning_rate: must be > 0, got -1").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace lockstep::training {

struct DataConfig {
  std::string format = "csv";           // "csv", "tfrecord" or "prediction_log"
  std::vector<std::string> train;       // files
  std::vector<std::string> validation;  // separate files; else split.validation of train
  std::vector<std::string> test;        // separate files; else split.test of train
  std::string label = "label";
  // Regression's target columns (CSV) or keys (tf.Example), in order: task regression sets it
  // to [label] when the config names none. Empty for classification, whose label is a class.
  std::vector<std::string> targets;
  std::vector<std::string> features;  // csv: default every column but the label; tfrecord: required
  double validation_fraction = 0.0;   // split.validation
  double test_fraction = 0.2;         // split.test
  uint64_t split_seed = 0;            // split.seed
  bool skip_corrupt_records = false;
  int64_t shuffle_buffer = 10000;
  int prefetch = 2;
  int threads = 1;
  // "memory": every file read into a table first; "streaming": read record by record, epoch
  // after epoch, through the shuffle buffer; "auto": streaming when the training files come to
  // more than streaming_threshold_mb and no split of them is asked for.
  std::string mode = "auto";
  int64_t streaming_threshold_mb = 512;
  std::string compression = "auto";  // TFRecord: "auto" (by the gzip magic), "none", "gzip"
  int64_t interleave = 4;            // streaming: files read at once, a record from each in turn
  int shards = 0;                    // streaming: input shards of a global batch; 0: one per worker
  int64_t stats_sample = 0;          // streaming: records the statistics come from; 0: all
  // Image augmentation of the training rows (data/augment.h), images of model.input_shape.
  int64_t augment_crop_padding = 0;  // augment.crop_padding: shifts of up to this many pixels
  bool augment_horizontal_flip = false;  // augment.horizontal_flip
  // prediction_log (data/prediction_log_reader.h): model-server's request logs as data.train,
  // labelled by request id from the CSV `labels`; `input` the logged tensor ("" its only one);
  // `original` the data the served model learned from (files of original_format), whose rows
  // join the logged ones and whose features name the logged columns.
  std::string labels;
  std::string input;
  std::string original_format = "csv";
  std::vector<std::string> original;

  friend bool operator==(const DataConfig&, const DataConfig&) = default;
};

struct LayerConfig {
  // A type of training/layers/ (CONFIG.md lists them).
  std::string type;
  // The layer's name ("" = type_index); its weights are named after it ("dense_0/kernel").
  std::string name;
  // The layers whose outputs it takes, by name ("input" is the model's input); empty = the
  // layer before it (the model's input for the first). Only earlier layers: no cycles.
  std::vector<std::string> inputs;
  int64_t units = 0;              // dense
  std::string activation;         // dense, conv2d, depthwise_conv2d, activation: "", relu, gelu, sigmoid, tanh, softmax,
                                  // swish, hard_swish, leaky_relu
  int64_t filters = 0;            // conv2d
  int64_t kernel_size = 3;        // conv2d, depthwise_conv2d
  int64_t dilation = 1;           // conv2d: taps this many pixels apart
  int64_t groups = 1;             // conv2d: channels in this many groups, each convolved on its own
  int64_t depth_multiplier = 1;   // depthwise_conv2d: outputs per input channel
  int64_t strides = 1;            // conv2d, depthwise_conv2d, pools (default: pool_size for pools)
  std::string padding = "valid";  // conv2d, depthwise_conv2d, pools: "valid" or "same"
  int64_t pool_size = 2;          // pools
  int64_t size = 2;               // upsampling2d: the factor along height and width
  std::string interpolation = "nearest";  // upsampling2d: "nearest" or "bilinear"
  double rate = 0.0;              // dropout
  int64_t vocabulary = 0;         // embedding: ids in [0, vocabulary)
  int64_t dimension = 0;          // embedding, patch_embedding
  double epsilon = 1e-5;          // layer_norm, transformer_encoder, batch_norm
  double momentum = 0.99;         // batch_norm: moving = momentum * moving + (1 - momentum) * batch
  bool use_bias = true;           // dense, conv2d, depthwise_conv2d
  int64_t axis = -1;              // concat: of one example's shape, negative from the end
  int64_t patch_size = 0;         // patch_embedding: square patches this many pixels wide
  int64_t heads = 0;              // multi_head_attention, transformer_encoder
  int64_t padding_id = 0;         // ... given the ids as a second input: keys of this id are masked
  int64_t mlp_dim = 0;            // transformer_encoder: the feed-forward layer's width
  bool norm_first = true;         // transformer_encoder: pre-norm (ViT's) or post-norm (BERT's)
  std::string initializer;        // "", glorot_uniform, he_uniform, zeros ("" = the layer's default)

  friend bool operator==(const LayerConfig&, const LayerConfig&) = default;
};

struct ModelConfig {
  std::vector<int64_t> input_shape;  // per example; default: [number of features]
  bool normalize = true;             // bake train-split mean and std into the graph
  std::vector<LayerConfig> layers;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Layer i's name: its own, or type_i ("dense_0").
std::string LayerName(const ModelConfig& model, size_t i);

// For each layer, the indices of the layers whose outputs it takes, in its `inputs` order (-1:
// the model's input). Fails, naming the layer, for an input that names no layer or a later one
// (layers take only earlier layers' outputs, so there are no cycles), or a name used twice.
StatusOr<std::vector<std::vector<int>>> LayerInputIndices(const ModelConfig& model);

struct ScheduleConfig {
  std::string type = "constant";  // constant, step, cosine
  int64_t warmup_steps = 0;       // linear warm-up from 0, for any type
  int64_t step_size = 1000;       // step: multiply by gamma every step_size steps
  double gamma = 0.1;
  double min_learning_rate = 0.0;  // cosine: where it ends

  friend bool operator==(const ScheduleConfig&, const ScheduleConfig&) = default;
};

struct OptimizerConfig {
  std::string type = "adam";  // sgd, momentum, adam, adamw
  double learning_rate = 0.001;
  double momentum = 0.9;  // momentum
  bool nesterov = false;  // momentum
  double beta1 = 0.9;     // adam, adamw
  double beta2 = 0.999;
  double epsilon = 1e-7;
  double weight_decay = 0.0;      // adamw: decoupled; others: added to the gradient (L2)
  double clip_global_norm = 0.0;  // 0: no clipping
  ScheduleConfig schedule;

  friend bool operator==(const OptimizerConfig&, const OptimizerConfig&) = default;
};

struct CheckpointConfig {
  std::string dir;          // "": no checkpoints
  int64_t every_steps = 0;  // 0: at the end of each epoch only
  int keep = 3;

  friend bool operator==(const CheckpointConfig&, const CheckpointConfig&) = default;
};

struct ExportConfig {
  std::string dir;         // <dir>/<version>/, version = highest + 1
  // "": export the final weights; "val_accuracy" (classification), "val_loss", or "val_mae"
  // (regression): the best epoch's.
  std::string best_by;
  std::string model_name;  // metadata; default: the config file's stem

  friend bool operator==(const ExportConfig&, const ExportConfig&) = default;
};

struct TrainConfig {
  DataConfig data;
  ModelConfig model;
  // "classification": a class per row, from the label; "regression": float targets
  // (data.targets), the model's outputs one per target value.
  std::string task = "classification";
  // classification: softmax_cross_entropy, sigmoid_cross_entropy, mean_squared_error (against
  // the one-hot label); regression: mean_squared_error (its default), mean_absolute_error, huber.
  std::string loss = "softmax_cross_entropy";
  double huber_delta = 1.0;  // huber: where the loss turns from quadratic to linear
  // The cross-entropies' targets: 1 - label_smoothing on the label, label_smoothing spread
  // evenly over the classes (softmax), or over the two outcomes (sigmoid).
  double label_smoothing = 0.0;
  OptimizerConfig optimizer;
  int64_t epochs = 10;
  int64_t batch_size = 32;
  bool drop_remainder = false;
  uint64_t seed = 0;
  // Data-parallel replicas on this machine (the mirrored strategy); 0: one per usable core.
  int replicas = 0;
  // "float32", or "bfloat16": matmuls and convolutions in bf16 with float32 accumulation,
  // everything else (master weights, optimiser state, loss, softmax) in float32.
  std::string precision = "float32";
  CheckpointConfig checkpoint;
  ExportConfig export_;  // "export" in the file
  std::string logdir;    // "": no TensorBoard events

  bool regression() const { return task == "regression"; }

  friend bool operator==(const TrainConfig&, const TrainConfig&) = default;
};

// Parses a config; `source` names it in messages. Paths in it are taken as they are (relative
// ones from the working directory, as for every other command-line tool).
StatusOr<TrainConfig> ParseTrainConfig(std::string_view json, std::string_view source);
StatusOr<TrainConfig> LoadTrainConfig(const std::string& path);

// The config as JSON in the same schema, every field written out: what the bundle's metadata
// records, and what ParseTrainConfig reads back to an equal config.
std::string TrainConfigToJson(const TrainConfig& config);

}  // namespace lockstep::training
