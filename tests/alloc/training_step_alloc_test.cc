// A warmed-up training step allocates nothing: the input pipeline's next batch, the forward
// and backward run of the training graph on two replicas, the all-reduce, gradient clipping
// and the optimiser's update, for an MLP with layer norm and dropout and for the digits CNN.
// Allocations are counted by counting_new.h.
#include <gtest/gtest.h>

#include "tests/alloc/counting_new.h"

#include "training/config.h"
#include "training/data/csv_reader.h"
#include "training/data/pipeline.h"
#include "training/data/split.h"
#include "training/initializers.h"
#include "training/mirrored_step.h"
#include "training/optimizer.h"

namespace lockstep::training {
namespace {

class TrainingStepAllocTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainingStepAllocTest, AWarmedUpStepAllocatesNothing) {
  const std::string json = R"({"data": {"train": "digits.csv"}, "batch_size": 32, "drop_remainder": true,
      )" + std::string(GetParam()) +
                           "}";
  StatusOr<TrainConfig> parsed = ParseTrainConfig(json, "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const TrainConfig& config = parsed.value();
  StatusOr<LabelledTable> table = ReadCsv(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv", {});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  const RowSplit split = StratifiedSplit(table->labels, 0.2, 0);
  const FeatureStats stats = ComputeFeatureStats(*table, split.train);
  StatusOr<ModelLayout> layout = PlanModel(config, DataSchema::Of(*table));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();

  Random rng(0);
  WeightMap masters;
  for (const WeightInfo& w : layout->weights) {
    Tensor t(DType::kFloat32, w.shape);
    ASSERT_TRUE(Initialize(w.initializer, w.fan_in, w.fan_out, rng, t.mutable_data<float>()).ok());
    masters[w.name] = t;
  }
  WeightMap weights = TrainingWeights(config, *layout, masters);
  std::vector<Parameter> params = TrainableParameters(config, *layout, weights);
  // Two replicas: the replica threads, their barriers and the all-reduce are on the path too.
  StatusOr<std::unique_ptr<MirroredStep>> step =
      MirroredStep::Create(config, *layout, weights, stats, {2, 1});
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  StatusOr<Optimizer> optimizer = Optimizer::Create(config.optimizer);
  ASSERT_TRUE(optimizer.ok());
  // As the trainer: without clipping, the update runs while the replicas reduce.
  const bool update_while_reducing = config.optimizer.clip_global_norm <= 0;
  const MirroredStep::ReducedFn update = [&](size_t p, int64_t begin, int64_t end) {
    optimizer->UpdateRange(params, p, static_cast<size_t>(begin), static_cast<size_t>(end));
  };
  for (size_t i = 0; i < params.size() && update_while_reducing; ++i)
    params[i].grad = (*step)->gradients()[i];
  BatchPipeline pipeline(
      *table, split.train,
      {.batch_size = 32, .drop_remainder = true, .shuffle_buffer = 1000, .seed = 1, .prefetch = 2});

  // One epoch as the trainer runs it (after StartEpoch, which may allocate); returns the
  // allocations it made.
  auto epoch = [&](int64_t e) -> int64_t {
    pipeline.StartEpoch(e);
    const int64_t before = alloc_test::Allocations();
    int64_t steps = 0;
    while (const Batch* b = pipeline.Next()) {
      const double lr = ScheduledLearningRate(config.optimizer.schedule, 0.001, optimizer->steps(), 1000);
      if (update_while_reducing) {
        optimizer->StartStep(params, lr);
        EXPECT_TRUE((*step)->Run(*b, e * 1000 + steps, &update).ok());
      } else {
        EXPECT_TRUE((*step)->Run(*b, e * 1000 + steps).ok());
        const auto grads = (*step)->gradients();
        for (size_t i = 0; i < params.size(); ++i) params[i].grad = grads[i];
        ClipByGlobalNorm(grads, config.optimizer.clip_global_norm);
        optimizer->Apply(params, lr);
      }
      ++steps;
    }
    EXPECT_GT(steps, 30);
    return alloc_test::Allocations() - before;
  };
  EXPECT_GT(epoch(0), 0) << "the warm-up epoch makes the session's scratch, kernel buffers and outputs";
  epoch(1);
  EXPECT_EQ(epoch(2), 0) << "allocations during a whole epoch of warmed-up steps";
}

INSTANTIATE_TEST_SUITE_P(
    Models, TrainingStepAllocTest,
    ::testing::Values(R"("optimizer": {"type": "adam", "clip_global_norm": 5},
                         "model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"},
                          {"type": "layer_norm"}, {"type": "dropout", "rate": 0.2},
                          {"type": "dense", "units": 10, "activation": "softmax"}]})",
                      R"("model": {"input_shape": [8, 8, 1], "layers": [
                          {"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu", "padding": "same"},
                          {"type": "max_pool2d", "pool_size": 2}, {"type": "flatten"},
                          {"type": "dense", "units": 10, "activation": "softmax"}]})",
                      R"("precision": "bfloat16", "model": {"input_shape": [8, 8, 1], "layers": [
                          {"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu", "padding": "same"},
                          {"type": "max_pool2d", "pool_size": 2}, {"type": "flatten"},
                          {"type": "dense", "units": 10, "activation": "softmax"}]})",
                      R"("model": {"input_shape": [8, 8, 1], "layers": [
                          {"type": "conv2d", "filters": 16, "kernel_size": 3, "padding": "same", "use_bias": false},
                          {"type": "batch_norm", "activation": "relu"}, {"type": "global_avg_pool"},
                          {"type": "dense", "units": 10, "activation": "softmax"}]})"),
    [](const auto& info) {
      return std::string(info.index == 0   ? "MlpLayerNormDropout"
                         : info.index == 1 ? "Cnn"
                         : info.index == 2 ? "CnnBf16"
                                           : "BatchNorm");
    });

}  // namespace
}  // namespace lockstep::training
