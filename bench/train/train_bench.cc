// Training throughput of model-train's step, as the trainer runs it: the mirrored step (forward
// and backward on every replica, the all-reduce) and Adam's update, on a fixed synthetic batch
// (the input pipeline is not what is measured; it assembles batches ahead on its own thread).
// One configuration per run; prints one JSON line. bench/train/run_train_bench.sh runs every
// configuration next to PyTorch's and prints the table.
//
//   bench_train --model mlp|cnn|vit|resnet --precision float32|bfloat16 --replicas N --threads T
//               [--batch B] [--seconds S] [--windows W]
//
// Models: mlp, 784-1024-1024-10 (relu), batch 256 by default; cnn, a digits CNN (Conv2D(32, 3,
// same, relu) -> MaxPool2D -> Flatten -> Dense(10) on 8x8x1; config/train/digits_cnn.json's
// until it gained a second convolution), batch 32 by default; vit, examples/fashion_mnist/vit.json's
// vision transformer on 28x28x1, batch 128 by default; resnet, examples/fashion_mnist/resnet.json's
// ResNet (three stages of two BasicBlocks with batch_norm, 16, 32 and 64 channels) on 28x28x1,
// batch 128. T is each replica's intra-op thread count. (The step is measured; the trainer's
// update of batch_norm's moving averages after it, a few hundred multiply-adds, is left out.)
//
// Timing: after a warm-up, W windows of about S / W seconds each; the reported rate is the
// median window's (a noisy neighbour spoils a window, not the result).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/cli/flags.h"
#include "training/config.h"
#include "training/initializers.h"
#include "training/mirrored_step.h"
#include "training/optimizer.h"

namespace {

using namespace lockstep;
using namespace lockstep::training;

int Fail(const std::string& message) {
  std::fprintf(stderr, "bench_train: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  StatusOr<Flags> flags = ParseFlags(
      argc - 1, argv + 1, {"model", "precision", "replicas", "threads", "batch", "seconds", "windows"}, {});
  if (!flags.ok()) return Fail(flags.status().message());
  const std::string model = flags->Has("model") ? flags->Get("model") : "mlp";
  const std::string precision = flags->Has("precision") ? flags->Get("precision") : "float32";
  const int replicas = flags->Has("replicas") ? std::atoi(flags->Get("replicas").c_str()) : 1;
  const int threads = flags->Has("threads") ? std::atoi(flags->Get("threads").c_str()) : 1;
  const double seconds = flags->Has("seconds") ? std::atof(flags->Get("seconds").c_str()) : 4.0;
  const int windows = flags->Has("windows") ? std::atoi(flags->Get("windows").c_str()) : 5;
  if (model != "mlp" && model != "cnn" && model != "vit" && model != "resnet") {
    return Fail("--model must be mlp, cnn, vit or resnet");
  }
  if (replicas < 1 || threads < 1 || windows < 1 || !(seconds > 0))
    return Fail("bad --replicas/--threads/--windows/--seconds");
  const int64_t batch_size =
      flags->Has("batch") ? std::atoll(flags->Get("batch").c_str())
                          : (model == "mlp" ? 256 : model == "cnn" ? 32 : 128);

  const std::string layers = model == "mlp" ? R"("model": {"normalize": false, "layers": [
                {"type": "dense", "units": 1024, "activation": "relu"},
                {"type": "dense", "units": 1024, "activation": "relu"},
                {"type": "dense", "units": 10, "activation": "softmax"}]})"
                             : model == "cnn" ? R"("model": {"normalize": false, "input_shape": [8, 8, 1], "layers": [
                {"type": "conv2d", "filters": 32, "kernel_size": 3, "padding": "same", "activation": "relu"},
                {"type": "max_pool2d", "pool_size": 2}, {"type": "flatten"},
                {"type": "dense", "units": 10, "activation": "softmax"}]})"
                                              // examples/fashion_mnist/vit.json's model.
                                              : R"("model": {"normalize": false, "input_shape": [28, 28, 1], "layers": [
                {"type": "patch_embedding", "patch_size": 4, "dimension": 64},
                {"type": "position_embedding"},
                {"type": "transformer_encoder", "heads": 4, "mlp_dim": 128},
                {"type": "transformer_encoder", "heads": 4, "mlp_dim": 128},
                {"type": "transformer_encoder", "heads": 4, "mlp_dim": 128},
                {"type": "layer_norm"}, {"type": "global_avg_pool"},
                {"type": "dense", "units": 10, "activation": "softmax"}]})";
  StatusOr<TrainConfig> parsed = ParseTrainConfig(
      R"({"data": {"train": "synthetic"}, "optimizer": {"type": "adam", "learning_rate": 0.001}, "precision": ")" +
          precision + R"(", )" + layers + "}",
      "bench");
  if (!parsed.ok()) return Fail(parsed.status().message());
  TrainConfig config = parsed.value();
  if (model == "resnet") {  // the example's layers, with the bench's optimiser and precision
    StatusOr<TrainConfig> example = LoadTrainConfig(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/fashion_mnist/resnet.json");
    if (!example.ok()) return Fail(example.status().message());
    config.model = example->model;
    config.model.normalize = false;
  }
  const int64_t features = model == "cnn" ? 64 : 784;
  DataSchema schema;
  schema.feature_keys = {{"x", features}};
  StatusOr<ModelLayout> layout = PlanModel(config, schema);
  if (!layout.ok()) return Fail(layout.status().message());

  Random rng(1);
  WeightMap weights;
  for (const WeightInfo& w : layout->weights) {
    Tensor t(DType::kFloat32, w.shape);
    if (Status s = Initialize(w.initializer, w.fan_in, w.fan_out, rng, t.mutable_data<float>()); !s.ok()) {
      return Fail(s.message());
    }
    weights[w.name] = t;
  }
  WeightMap training_weights = TrainingWeights(config, *layout, weights);
  std::vector<Parameter> params = TrainableParameters(config, *layout, training_weights);
  StatusOr<std::unique_ptr<MirroredStep>> step =
      MirroredStep::Create(config, *layout, training_weights, FeatureStats{}, {replicas, threads});
  if (!step.ok()) return Fail(step.status().message());
  StatusOr<Optimizer> optimizer = Optimizer::Create(config.optimizer);
  if (!optimizer.ok()) return Fail(optimizer.status().message());
  // As the trainer: the update on the replicas while they reduce, or after the step on every
  // core the replicas use.
  ThreadPool update_pool(replicas * threads);
  const bool update_while_reducing = (*step)->reduces_locally();
  const MirroredStep::ReducedFn update_reduced = [&](size_t p, int64_t begin, int64_t end) {
    optimizer->UpdateRange(params, p, static_cast<size_t>(begin), static_cast<size_t>(end));
  };
  for (size_t i = 0; i < params.size() && update_while_reducing; ++i)
    params[i].grad = (*step)->gradients()[i];

  // Pixel-like features in [0, 1), labels uniform over the classes.
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> value(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch_size * features));
  for (float& v : x) v = value(gen);
  std::vector<int32_t> y(static_cast<size_t>(batch_size));
  for (int32_t& v : y) v = static_cast<int32_t>(gen() % 10);
  Batch batch;
  batch.features = Tensor::FromVector<float>(Shape{batch_size, features}, x);
  batch.labels = Tensor::FromVector<int32_t>(Shape{batch_size}, y);
  batch.rows = batch.global_rows = batch_size;

  int64_t steps_done = 0;
  auto train_step = [&]() -> bool {
    if (update_while_reducing) optimizer->StartStep(params, 0.001);
    if (!(*step)->Run(batch, steps_done, update_while_reducing ? &update_reduced : nullptr).ok())
      return false;
    if (!update_while_reducing) {
      const auto grads = (*step)->gradients();
      for (size_t i = 0; i < params.size(); ++i) params[i].grad = grads[i];
      optimizer->Apply(params, 0.001, &update_pool);
    }
    ++steps_done;
    return true;
  };
  using Clock = std::chrono::steady_clock;
  // Warm-up: a few steps, and at least a fifth of a window.
  const auto warm_until = Clock::now() + std::chrono::duration<double>(seconds / windows / 5);
  for (int i = 0; i < 3 || Clock::now() < warm_until; ++i) {
    if (!train_step()) return Fail("a training step failed");
  }
  std::vector<double> rates;
  const auto window = std::chrono::duration<double>(seconds / windows);
  for (int w = 0; w < windows; ++w) {
    const auto begin = Clock::now();
    int64_t n = 0;
    while (Clock::now() - begin < window) {
      if (!train_step()) return Fail("a training step failed");
      ++n;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
    rates.push_back(static_cast<double>(n * batch_size) / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  std::printf(
      "{\"framework\": \"lockstep\", \"model\": \"%s\", \"precision\": \"%s\", \"replicas\": %d, "
      "\"threads_per_replica\": %d, \"batch\": %lld, \"samples_per_s\": %.1f, \"loss\": %.4f}\n",
      model.c_str(), precision.c_str(), replicas, threads, static_cast<long long>(batch_size),
      rates[rates.size() / 2], (*step)->loss());
  return 0;
}
