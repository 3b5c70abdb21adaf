// The input pipeline (our tf.data): an epoch's rows of a LabelledTable, shuffled through a
// buffer, cut into batches, assembled ahead of the trainer on background threads.
//
// Deterministic: the batches of epoch e depend only on the rows, the options and (seed, e),
// never on thread timing or on how many threads assemble them. So a run resumed at epoch e,
// batch b (StartEpoch(e), then Skip(b)) sees exactly the batches an uninterrupted run saw.
//
// No allocation per batch: `prefetch` + 1 batch buffers are allocated once and reused; a
// batch returned by Next stays valid until the following Next, Skip or StartEpoch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/tensor.h"
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
};

struct Batch {
  Tensor features;  // float32 [rows, num_features]: a view of the first `rows` rows of a buffer
  Tensor labels;    // int32 [rows]
  int64_t rows = 0;
  int64_t index = 0;        // within the epoch
  int64_t global_rows = 0;  // of the whole global batch: `rows` unless the batch is sharded
};

class BatchPipeline {
 public:
  // `rows`: the table rows an epoch goes through (a split). The table must outlive the
  // pipeline. Starts at epoch 0.
  BatchPipeline(const LabelledTable& table, std::vector<int64_t> rows, PipelineOptions options);
  ~BatchPipeline();
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  int64_t batches_per_epoch() const;

  // Begins epoch `epoch` (0-based) from its first batch; whatever was in flight is dropped.
  void StartEpoch(int64_t epoch);
  // Passes over the next `count` batches of the epoch without handing them out.
  void Skip(int64_t count);
  // The next batch of the epoch, or null after its last one.
  const Batch* Next();

 private:
  struct Slot {
    Batch batch;
    std::vector<float> features;  // batch_size x num_features
    std::vector<int32_t> labels;
    int64_t ready = -1;  // the batch index assembled here, -1 for none
  };

  void Assemble(int64_t index, Slot& slot) const;
  void Produce();
  // Stops handing out work and waits until no thread is assembling (lock held).
  void Quiesce(std::unique_lock<std::mutex>& lock);

  const LabelledTable& table_;
  const std::vector<int64_t> rows_;
  const PipelineOptions options_;
  std::vector<int64_t> order_;  // this epoch's rows, shuffled
  std::vector<Slot> slots_;     // prefetch + 1, batch i in slot i % size

  std::mutex mu_;
  std::condition_variable work_;   // producers wait for a batch to assemble
  std::condition_variable ready_;  // Next and Quiesce wait on producers
  int64_t end_ = 0;                // batches this epoch
  int64_t next_to_make_ = 0;
  int64_t next_to_hand_ = 0;  // the batch Next returns next
  int in_flight_ = 0;         // producers assembling now
  bool stopping_ = false;
  std::vector<std::thread> producers_;
};

// tf.data's shuffle(buffer_size) over `items`, in place, driven by `seed`.
void ShuffleThroughBuffer(std::vector<int64_t>& items, int64_t buffer, uint64_t seed);

}  // namespace lockstep::training
