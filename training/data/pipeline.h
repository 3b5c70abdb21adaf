// The input pipeline (our tf.data): an epoch's rows of a LabelledTable, shuffled through a
// buffer, cut into batches, assembled ahead of the trainer on background threads. The
// streaming pipeline (streaming_pipeline.h) is the other BatchSource, for data read from files
// epoch after epoch.
//
// Deterministic: the batches of epoch e depend only on the rows, the options and (seed, e),
// never on thread timing or on how many threads assemble them. So a run resumed at epoch e,
// batch b (StartEpoch(e), then Skip(b)) sees exactly the batches an uninterrupted run saw.
//
// No allocation per batch: `prefetch` + 1 batch buffers are allocated once and reused; a
// batch returned by Next stays valid until the following Next, Skip or StartEpoch.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/status.h"
#include "training/data/augment.h"
#include "training/data/batch_ring.h"
#include "training/data/labelled_table.h"

namespace lockstep::training {

struct PipelineOptions {
  int64_t batch_size = 32;
  // Leave out an epoch's last, short batch (else it comes out with fewer rows).
  bool drop_remainder = false;
  // tf.data's shuffle(buffer_size): each row comes out uniformly from a buffer of this many,
  // refilled in order. 0 or 1: no shuffling; at least the row count: a full shuffle.
  int64_t shuffle_buffer = 0;
  uint64_t seed = 0;
  // Batches assembled ahead of the one the trainer holds. 0: assembled by Next itself.
  int prefetch = 2;
  // Threads assembling batches when prefetch > 0.
  int threads = 1;
  // Multi-worker training: this worker assembles only its shard of each global batch, rows
  // [n * shard_index / shard_count, n * (shard_index + 1) / shard_count) of its n rows. Every
  // worker shuffles the same way, so the shards of a batch are disjoint and make it whole.
  int shard_index = 0;
  int shard_count = 1;
  // Applied to every row of the training batches (the draws keyed by the row's position in the
  // epoch's order).
  AugmentOptions augment = {};
};

// Where the trainer takes its batches from, epoch after epoch.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t batches_per_epoch() const = 0;
  // Begins epoch `epoch` (0-based) from its first batch; whatever was in flight is dropped.
  virtual void StartEpoch(int64_t epoch) = 0;
  // Passes over the next `count` batches of the epoch without handing them out.
  virtual void Skip(int64_t count) = 0;
  // The next batch of the epoch, or null after its last one or on an error (status()). Valid
  // until the following call.
  virtual const Batch* Next() = 0;
  // Why Next returned null early (a bad record in a streamed file), else OK.
  virtual Status status() const = 0;
};

class BatchPipeline final : public BatchSource {
 public:
  // `rows`: the table rows an epoch goes through (a split). The table must outlive the
  // pipeline. Starts at epoch 0.
  BatchPipeline(const LabelledTable& table, std::vector<int64_t> rows, PipelineOptions options);

  int64_t batches_per_epoch() const override;
  void StartEpoch(int64_t epoch) override;
  void Skip(int64_t count) override { ring_.Skip(count); }
  const Batch* Next() override { return ring_.Next(); }
  Status status() const override { return ring_.status(); }

 private:
  Status Assemble(int64_t index, BatchBuffers& out) const;

  const LabelledTable& table_;
  const std::vector<int64_t> rows_;
  const PipelineOptions options_;
  std::vector<int64_t> order_;  // this epoch's rows, shuffled
  int64_t epoch_ = 0;
  BatchRing ring_;              // last: its threads stop before the members above go
};

// tf.data's shuffle(buffer_size) over `items`, in place, driven by `seed`.
void ShuffleThroughBuffer(std::vector<int64_t>& items, int64_t buffer, uint64_t seed);

// The seed of epoch `epoch`'s shuffle, from the run's seed.
uint64_t EpochShuffleSeed(uint64_t seed, int64_t epoch);

}  // namespace lockstep::training
