// The mirrored strategy: N replicas' all-reduced gradient is the gradient of the whole batch
// (as one replica computes it, up to float rounding), whatever the shard sizes; a run is the
// same bits every time; and N = 1 and N = 2 train the digits to the same accuracy.
#include "training/mirrored_step.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/bundle/bundle.h"
#include "training/config.h"
#include "training/data/csv_reader.h"
#include "training/data/split.h"
#include "training/initializers.h"
#include "training/trainer.h"

namespace lockstep::training {
namespace {

struct Fixture {
  TrainConfig config;
  LabelledTable table;
  FeatureStats stats;
  ModelLayout layout;
  WeightMap weights;
};

Fixture Make(const std::string& model) {
  Fixture f;
  StatusOr<TrainConfig> c = ParseTrainConfig(R"({"data": {"train": "d.csv"}, )" + model + "}", "test");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  f.config = c.value();
  StatusOr<LabelledTable> t = ReadCsv(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv", {});
  EXPECT_TRUE(t.ok());
  f.table = std::move(t).value();
  std::vector<int64_t> rows(static_cast<size_t>(f.table.num_rows()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  f.stats = ComputeFeatureStats(f.table, rows);
  StatusOr<ModelLayout> layout = PlanModel(f.config, DataSchema::Of(f.table));
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  f.layout = layout.value();
  Random rng(3);
  for (const WeightInfo& w : f.layout.weights) {
    Tensor t(DType::kFloat32, w.shape);
    EXPECT_TRUE(Initialize(w.initializer, w.fan_in, w.fan_out, rng, t.mutable_data<float>()).ok());
    f.weights[w.name] = t;
  }
  return f;
}

// Rows [0, n) of the digits as one batch.
Batch FirstRows(const LabelledTable& t, int64_t n) {
  Batch b;
  b.features = Tensor::FromVector<float>(
      Shape{n, t.num_features()},
      std::vector<float>(t.features.begin(),
                         t.features.begin() + static_cast<std::ptrdiff_t>(n * t.num_features())));
  b.labels = Tensor::FromVector<int32_t>(
      Shape{n}, std::vector<int32_t>(t.labels.begin(), t.labels.begin() + static_cast<std::ptrdiff_t>(n)));
  b.rows = n;
  return b;
}

const char* kCnn = R"("model": {"input_shape": [8, 8, 1], "layers": [
    {"type": "conv2d", "filters": 4, "kernel_size": 3, "activation": "relu"},
    {"type": "max_pool2d"}, {"type": "flatten"}, {"type": "dense", "units": 10}]})";

// Float32 sums in another order differ by rounding only: a few units in the last place of
// the terms' magnitude. 1e-5 relative to the largest gradient element is far below any
// mistake (a shard weighted wrongly is off by tens of percent).
TEST(MirroredStepTest, TheAllReducedGradientIsTheWholeBatchs) {
  Fixture f = Make(kCnn);
  StatusOr<std::unique_ptr<MirroredStep>> one =
      MirroredStep::Create(f.config, f.layout, f.weights, f.stats, {1, 1});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  for (int replicas : {2, 3}) {
    StatusOr<std::unique_ptr<MirroredStep>> many =
        MirroredStep::Create(f.config, f.layout, f.weights, f.stats, {replicas, 1});
    ASSERT_TRUE(many.ok()) << many.status().ToString();
    for (int64_t rows : {int64_t{32}, int64_t{7}, int64_t{1}}) {  // even shards, uneven ones, an empty one
      SCOPED_TRACE(std::to_string(replicas) + " replicas, " + std::to_string(rows) + " rows");
      const Batch batch = FirstRows(f.table, rows);
      ASSERT_TRUE((*one)->Run(batch, 0).ok());
      ASSERT_TRUE((*many)->Run(batch, 0).ok());
      EXPECT_NEAR((*many)->loss(), (*one)->loss(), 1e-5 * std::fabs((*one)->loss()));
      EXPECT_EQ((*many)->correct(), (*one)->correct());
      for (size_t i = 0; i < f.layout.weights.size(); ++i) {
        const auto a = (*one)->gradients()[i];
        const auto b = (*many)->gradients()[i];
        ASSERT_EQ(a.size(), b.size());
        float largest = 0;
        for (float v : a) largest = std::max(largest, std::fabs(v));
        for (size_t e = 0; e < a.size(); ++e) {
          ASSERT_NEAR(b[e], a[e], 1e-5f * largest + 1e-12f) << f.layout.weights[i].name << "[" << e << "]";
        }
      }
    }
  }
}

const char* kBatchNormCnn = R"("model": {"input_shape": [8, 8, 1], "layers": [
    {"type": "conv2d", "filters": 4, "kernel_size": 3, "use_bias": false},
    {"type": "batch_norm", "activation": "relu"},
    {"type": "global_avg_pool"}, {"type": "batch_norm"}, {"type": "dense", "units": 10}]})";

// batch_norm's statistics are the global batch's, its rows summed in the batch's order whoever
// holds them: the same bits from 1, 2 or 3 replicas, also when a replica has no rows. The
// gradients, whose sums over the rows go in another order, agree up to rounding. batch_norm's
// gradient subtracts the batch's means from each row's, so its rounding is of the size of the
// terms, not of the result: the first gamma's gradient here is a thousandth of the largest
// gradient element, and agrees to 1e-5 of that element, far below what a shard weighted wrongly
// would be off by (tens of percent of it).
TEST(MirroredStepTest, BatchNormStatisticsAreTheGlobalBatchsBitForBitOnAnyReplicaCount) {
  Fixture f = Make(kBatchNormCnn);
  ASSERT_EQ(f.layout.state.size(), 4u);
  StatusOr<std::unique_ptr<MirroredStep>> one = MirroredStep::Create(f.config, f.layout, f.weights, f.stats, {1, 1});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  for (int replicas : {2, 3}) {
    StatusOr<std::unique_ptr<MirroredStep>> many =
        MirroredStep::Create(f.config, f.layout, f.weights, f.stats, {replicas, 1});
    ASSERT_TRUE(many.ok()) << many.status().ToString();
    for (int64_t rows : {int64_t{32}, int64_t{7}, int64_t{2}}) {
      SCOPED_TRACE(std::to_string(replicas) + " replicas, " + std::to_string(rows) + " rows");
      const Batch batch = FirstRows(f.table, rows);
      ASSERT_TRUE((*one)->Run(batch, 0).ok());
      ASSERT_TRUE((*many)->Run(batch, 0).ok());
      ASSERT_EQ((*many)->batch_state().size(), 4u);
      for (size_t i = 0; i < 4; ++i) {
        const auto a = (*one)->batch_state()[i], b = (*many)->batch_state()[i];
        ASSERT_EQ(a.size(), b.size());
        for (size_t e = 0; e < a.size(); ++e) EXPECT_EQ(a[e], b[e]) << f.layout.state[i].name << "[" << e << "]";
      }
      EXPECT_NEAR((*many)->loss(), (*one)->loss(), 1e-5 * std::fabs((*one)->loss()));
      float largest = 0;  // of every gradient: the scale of the rounding of what flows back
      for (const auto g : (*one)->gradients()) {
        for (float v : g) largest = std::max(largest, std::fabs(v));
      }
      for (size_t i = 0; i < f.layout.weights.size(); ++i) {
        const auto a = (*one)->gradients()[i], b = (*many)->gradients()[i];
        for (size_t e = 0; e < a.size(); ++e) {
          ASSERT_NEAR(b[e], a[e], 1e-5f * largest) << f.layout.weights[i].name << "[" << e << "]";
        }
      }
    }
  }
}

// The trainer's fast path: each replica updates the stretches of the gradients it has just
// reduced (Optimizer::UpdateRange from on_reduced), against reducing first and then applying
// the update: the same weights, bit for bit, after several steps; in float32 and in bf16, where
// the update also refreshes the bf16 copies the replicas read.
TEST(MirroredStepTest, UpdatingWhileReducingIsUpdatingAfterwards) {
  for (const char* precision : {"float32", "bfloat16"}) {
    SCOPED_TRACE(precision);
    Fixture f = Make(std::string(R"("precision": ")") + precision + R"(", )" + kCnn);
    struct Run {
      WeightMap weights;
      std::vector<Parameter> params;
      std::unique_ptr<MirroredStep> step;
    };
    Run fused, separate;
    for (Run* r : {&fused, &separate}) {
      // Each its own copy of the initial weights.
      WeightMap masters;
      for (const auto& [name, t] : f.weights) {
        masters[name] =
            Tensor::FromVector<float>(t.shape(), {t.data<float>().begin(), t.data<float>().end()});
      }
      r->weights = TrainingWeights(f.config, f.layout, masters);
      r->params = TrainableParameters(f.config, f.layout, r->weights);
      StatusOr<std::unique_ptr<MirroredStep>> s =
          MirroredStep::Create(f.config, f.layout, r->weights, f.stats, {2, 1});
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      r->step = std::move(s).value();
      ASSERT_TRUE(r->step->reduces_locally());
    }
    EXPECT_EQ(f.config.precision == "bfloat16", fused.params[0].bf16_value.size() > 0);
    StatusOr<Optimizer> a = Optimizer::Create(f.config.optimizer), b = Optimizer::Create(f.config.optimizer);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < fused.params.size(); ++i) fused.params[i].grad = fused.step->gradients()[i];
    const MirroredStep::ReducedFn update = [&](size_t p, int64_t begin, int64_t end) {
      a->UpdateRange(fused.params, p, static_cast<size_t>(begin), static_cast<size_t>(end));
    };
    const Batch batch = FirstRows(f.table, 48);
    for (int step = 0; step < 4; ++step) {
      a->StartStep(fused.params, 0.01);
      ASSERT_TRUE(fused.step->Run(batch, step, &update).ok());
      ASSERT_TRUE(separate.step->Run(batch, step).ok());
      for (size_t i = 0; i < separate.params.size(); ++i)
        separate.params[i].grad = separate.step->gradients()[i];
      b->Apply(separate.params, 0.01);
    }
    for (const auto& [name, t] : fused.weights)
      EXPECT_TRUE(t.BitwiseEqual(separate.weights.at(name))) << name;
  }
}

// A step that does not reduce by itself (one replica) refuses an update during the reduction.
TEST(MirroredStepTest, OneReplicaRefusesAnUpdateDuringTheReduction) {
  Fixture f = Make(kCnn);
  StatusOr<std::unique_ptr<MirroredStep>> one =
      MirroredStep::Create(f.config, f.layout, f.weights, f.stats, {1, 1});
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE((*one)->reduces_locally());
  const MirroredStep::ReducedFn update = [](size_t, int64_t, int64_t) {};
  EXPECT_EQ((*one)->Run(FirstRows(f.table, 8), 0, &update).code(), StatusCode::kFailedPrecondition);
}

TrainConfig DigitsRun(int replicas, const std::string& export_dir) {
  StatusOr<TrainConfig> c = ParseTrainConfig(
      R"({"data": {"train": ")" + std::string(LOCKSTEP_SOURCE_DIR) +
          R"(/examples/data/digits.csv"}, "epochs": 10, "batch_size": 64, "optimizer": {"learning_rate": 0.005},
      "model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"}, {"type": "dropout", "rate": 0.1},
                           {"type": "dense", "units": 10, "activation": "softmax"}]}})",
      "test");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  TrainConfig config = c.value();
  config.replicas = replicas;
  config.export_.dir = export_dir;
  return config;
}

std::string MirroredTempDir(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("lockstep_mirrored_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Two replicas, run twice: the same weights bit for bit. One replica against two with the
// same global batch: the test accuracy within one percentage point (the sums differ in order,
// so the runs drift apart by rounding; on the 359 test digits one point is under 4 of them).
TEST(MirroredStepTest, RunsAreRepeatableAndReplicaCountsAgree) {
  const std::string dir = MirroredTempDir("runs");
  std::filesystem::remove_all(dir);
  StatusOr<TrainReport> a = Train(DigitsRun(2, dir + "/a"), "d");
  StatusOr<TrainReport> b = Train(DigitsRun(2, dir + "/b"), "d");
  StatusOr<TrainReport> single = Train(DigitsRun(1, dir + "/c"), "d");
  ASSERT_TRUE(a.ok() && b.ok() && single.ok()) << a.status().ToString() << single.status().ToString();
  StatusOr<Model> ma = ReadBundle(a->export_path), mb = ReadBundle(b->export_path);
  ASSERT_TRUE(ma.ok() && mb.ok());
  for (const auto& [name, tensor] : ma->weights)
    EXPECT_TRUE(tensor.BitwiseEqual(mb->weights.at(name))) << name;
  EXPECT_NEAR(a->test_accuracy, single->test_accuracy, 0.01);
  EXPECT_GT(a->test_accuracy, 0.95);
  std::printf("test accuracy: 1 replica %.4f, 2 replicas %.4f\n", single->test_accuracy, a->test_accuracy);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::training

namespace lockstep::training {
namespace {

// Each weight a product reads is packed once per step for every replica: the training graph
// of a two-layer MLP has three such products (the first kernel forward; the second forward
// and in the backward pass for the hidden layer's gradient), and one replica's gradients, run
// with the shared packings, are the bits it computes packing for itself.
TEST(MirroredStepTest, SharedPackingsAreTheBitsOfEachReplicaPackingItsOwn) {
  for (const char* precision : {"float32", "bfloat16"}) {
    Fixture f = Make(std::string(R"("precision": ")") + precision + R"(", "model": {"layers": [
        {"type": "dense", "units": 16, "activation": "relu"}, {"type": "dense", "units": 10}]})");
    const WeightMap weights = TrainingWeights(f.config, f.layout, f.weights);
    StatusOr<std::unique_ptr<GradientStep>> step = GradientStep::Create(f.config, f.layout, weights, f.stats);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    ASSERT_EQ((*step)->pack_sites(), 3u) << precision;
    std::vector<PackedB> packs((*step)->pack_sites());
    std::vector<const PackedB*> pointers;
    for (size_t s = 0; s < packs.size(); ++s) {
      ASSERT_TRUE((*step)->PackSite(s, packs[s]).ok());
      pointers.push_back(&packs[s]);
    }
    const Batch batch = FirstRows(f.table, 24);
    ASSERT_TRUE((*step)->Run(batch, 0).ok());
    std::vector<std::vector<float>> own;
    for (std::span<float> g : (*step)->gradients()) own.emplace_back(g.begin(), g.end());
    ASSERT_TRUE((*step)->Run(batch, 0, pointers).ok());
    for (size_t i = 0; i < own.size(); ++i) {
      const std::span<float> shared = (*step)->gradients()[i];
      EXPECT_TRUE(std::equal(own[i].begin(), own[i].end(), shared.begin(), shared.end())) << precision << " " << i;
    }
  }
}

}  // namespace
}  // namespace lockstep::training
