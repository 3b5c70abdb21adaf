#include "training/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/bundle/bundle.h"
#include "training/trainer.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lockstep_ckpt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

Checkpoint Sample(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.epoch = 2;
  c.batches_done = 5;
  c.weights["dense_0/kernel"] = {1.5f, -2.0f, 0.25f};
  c.weights["dense_0/bias"] = {0.0f};
  c.optimizer_state["dense_0/kernel"] = {{0.1f, 0.2f, 0.3f}, {1.0f, 2.0f, 3.0f}};
  c.optimizer_state["dense_0/bias"] = {{0.5f}, {0.75f}};
  c.best_metric = 0.875;
  c.best_weights["dense_0/kernel"] = {1.0f, -1.0f, 0.5f};
  c.best_weights["dense_0/bias"] = {0.125f};
  return c;
}

TEST_F(CheckpointTest, RoundTripsAndKeepsTheNewest) {
  for (int64_t step : {10, 20, 30, 40}) ASSERT_TRUE(WriteCheckpoint(dir_.string(), Sample(step), 2).ok());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.path().extension() == ".ckpt";
  EXPECT_EQ(files, 2);
  EXPECT_FALSE(fs::exists(dir_ / "checkpoint-20.ckpt"));
  StatusOr<Checkpoint> c = ReadLatestCheckpoint(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Checkpoint expected = Sample(40);
  EXPECT_EQ(c->step, 40);
  EXPECT_EQ(c->epoch, 2);
  EXPECT_EQ(c->batches_done, 5);
  EXPECT_EQ(c->weights, expected.weights);
  EXPECT_EQ(c->optimizer_state, expected.optimizer_state);
  EXPECT_EQ(c->best_metric, expected.best_metric);
  EXPECT_EQ(c->best_weights, expected.best_weights);
}

TEST_F(CheckpointTest, DamageIsAnErrorNamingTheFile) {
  EXPECT_EQ(ReadLatestCheckpoint(dir_.string()).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteCheckpoint(dir_.string(), Sample(7), 3).ok());
  const fs::path file = dir_ / "checkpoint-7.ckpt";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  StatusOr<Checkpoint> c = ReadLatestCheckpoint(dir_.string());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c.status().message(), "checkpoint '" + file.string() + "': damaged (CRC mismatch)");
  // A temporary left by a crash mid-write is never read.
  std::ofstream(dir_ / ".checkpoint-9.tmp") << "partial";
  EXPECT_EQ(ReadLatestCheckpoint(dir_.string()).status().message(), c.status().message());
}

// With `batch_norm`, the hidden layer's ReLU comes after a batch_norm, whose moving averages
// the checkpoint must carry.
TrainConfig DigitsConfig(const fs::path& dir, bool batch_norm = false) {
  TrainConfig c;
  c.data.train = {std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv"};
  c.data.validation_fraction = 0.1;
  LayerConfig hidden, norm, dropout, out;
  hidden.type = out.type = "dense";
  hidden.units = 16;
  hidden.activation = "relu";
  norm.type = "batch_norm";
  norm.momentum = 0.9;
  dropout.type = "dropout";
  dropout.rate = 0.2;
  out.units = 10;
  out.activation = "softmax";
  c.model.layers = {hidden, dropout, out};
  if (batch_norm) {
    hidden.activation = "";
    hidden.use_bias = false;
    norm.activation = "relu";
    c.model.layers = {hidden, norm, dropout, out};
  }
  c.export_.best_by = "val_accuracy";
  c.epochs = 4;
  c.optimizer.learning_rate = 0.01;
  c.checkpoint.dir = (dir / "checkpoints").string();
  c.export_.dir = (dir / "export").string();
  return c;
}

// Train 4 epochs straight, and the same run cut at step 50 (mid-epoch) then resumed: the
// exported weights (the best epoch's, by validation accuracy) are the same bits, dropout masks,
// batch_norm's moving averages and all.
TEST_F(CheckpointTest, AResumedRunEndsWhereAnUninterruptedOneDoes) {
  for (bool batch_norm : {false, true}) {
    SCOPED_TRACE(batch_norm ? "with batch_norm" : "without batch_norm");
    const fs::path dir = dir_ / (batch_norm ? "bn" : "plain");
    StatusOr<TrainReport> straight = Train(DigitsConfig(dir / "a", batch_norm), "digits");
    ASSERT_TRUE(straight.ok()) << straight.status().ToString();

    TrainConfig cut = DigitsConfig(dir / "b", batch_norm);
    cut.checkpoint.every_steps = 7;
    TrainOptions first;
    first.stop_after_steps = 50;
    StatusOr<TrainReport> part = Train(cut, "digits", first);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    EXPECT_TRUE(part->stopped_early);
    EXPECT_EQ(part->steps, 50);
    EXPECT_TRUE(part->export_path.empty());
    TrainOptions resume;
    resume.resume = true;
    StatusOr<TrainReport> resumed = Train(cut, "digits", resume);
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    EXPECT_EQ(resumed->steps, straight->steps);
    EXPECT_EQ(resumed->test_accuracy, straight->test_accuracy);

    StatusOr<Model> a = ReadBundle(straight->export_path);
    StatusOr<Model> b = ReadBundle(resumed->export_path);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->weights.size(), b->weights.size());
    for (const auto& [name, tensor] : a->weights) {
      EXPECT_TRUE(tensor.BitwiseEqual(b->weights.at(name))) << name;
    }
  }
}

}  // namespace
}  // namespace lockstep::training
