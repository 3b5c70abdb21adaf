#include "training/data/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/training/drain_epoch.h"

namespace lockstep::training {
namespace {

// Row i has features (i, 10 i) and label i % 3, so a batch shows which rows it holds.
LabelledTable CountingTable(int64_t n) {
  LabelledTable t;
  t.feature_names = {"i", "ten_i"};
  for (int64_t i = 0; i < n; ++i) {
    t.features.push_back(static_cast<float>(i));
    t.features.push_back(static_cast<float>(10 * i));
    t.labels.push_back(static_cast<int32_t>(i % 3));
  }
  return t;
}

std::vector<int64_t> AllRows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

using test::DrainEpoch;

TEST(PipelineTest, BatchesInOrderWithoutShuffling) {
  const LabelledTable t = CountingTable(10);
  BatchPipeline p(t, AllRows(10), {.batch_size = 4, .prefetch = 0});
  EXPECT_EQ(p.batches_per_epoch(), 3);
  const auto batches = DrainEpoch(p);
  EXPECT_EQ(batches, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(p.Next(), nullptr);

  BatchPipeline dropping(t, {9, 3, 5, 1, 7}, {.batch_size = 2, .drop_remainder = true, .prefetch = 0});
  EXPECT_EQ(dropping.batches_per_epoch(), 2);
  EXPECT_EQ(DrainEpoch(dropping), (std::vector<std::vector<int64_t>>{{9, 3}, {5, 1}}));
}

TEST(PipelineTest, ShuffledEpochsCoverEveryRowOnceAndDiffer) {
  const LabelledTable t = CountingTable(100);
  BatchPipeline p(t, AllRows(100), {.batch_size = 7, .shuffle_buffer = 1000, .seed = 5, .prefetch = 2});
  std::vector<std::vector<std::vector<int64_t>>> epochs;
  for (int64_t e = 0; e < 3; ++e) {
    p.StartEpoch(e);
    epochs.push_back(DrainEpoch(p));
    std::vector<int64_t> seen;
    for (const auto& b : epochs.back()) seen.insert(seen.end(), b.begin(), b.end());
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, AllRows(100)) << "epoch " << e;
    EXPECT_NE(seen, AllRows(100)) << "epoch " << e << " is not shuffled";
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
}

// The batches depend on (rows, options, seed, epoch) only: not on prefetching, the number of
// threads, or what happened before the epoch started.
TEST(PipelineTest, DeterministicWhateverTheThreads) {
  const LabelledTable t = CountingTable(257);
  PipelineOptions options{.batch_size = 16, .shuffle_buffer = 64, .seed = 11, .prefetch = 0};
  BatchPipeline reference(t, AllRows(257), options);
  reference.StartEpoch(4);
  const auto expected = DrainEpoch(reference);
  for (auto [prefetch, threads] : {std::pair{1, 1}, {3, 1}, {4, 3}}) {
    options.prefetch = prefetch;
    options.threads = threads;
    BatchPipeline p(t, AllRows(257), options);
    (void)p.Next();  // part of epoch 0, then a jump
    p.StartEpoch(4);
    EXPECT_EQ(DrainEpoch(p), expected) << prefetch << " ahead, " << threads << " threads";
  }
}

TEST(PipelineTest, SkipResumesMidEpoch) {
  const LabelledTable t = CountingTable(50);
  const PipelineOptions options{
      .batch_size = 8, .shuffle_buffer = 50, .seed = 2, .prefetch = 2, .threads = 2};
  BatchPipeline whole(t, AllRows(50), options);
  whole.StartEpoch(1);
  const auto all = DrainEpoch(whole);
  BatchPipeline resumed(t, AllRows(50), options);
  resumed.StartEpoch(1);
  (void)resumed.Next();
  resumed.Skip(2);
  const Batch* b = resumed.Next();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->index, 3);
  EXPECT_EQ(b->features.data<float>()[0], static_cast<float>(all[3][0]));
}

TEST(ShuffleThroughBufferTest, SmallBufferShufflesLocally) {
  std::vector<int64_t> items = AllRows(1000);
  ShuffleThroughBuffer(items, 10, 1);
  EXPECT_NE(items, AllRows(1000));
  // With a buffer of 10, item i cannot come out before position i - 9.
  for (size_t pos = 0; pos < items.size(); ++pos) EXPECT_LE(items[pos], static_cast<int64_t>(pos) + 9);
  std::vector<int64_t> unshuffled = AllRows(5);
  ShuffleThroughBuffer(unshuffled, 1, 1);
  EXPECT_EQ(unshuffled, AllRows(5));
}

}  // namespace
}  // namespace lockstep::training
