// BatchRing: the prefetching half of an input pipeline, shared by the in-memory
// (pipeline.h) and streaming (streaming_pipeline.h) ones. A fixed ring of `prefetch` + 1 batch
// buffers, allocated once; background threads fill batch after batch through the owner's
// assemble function while the trainer holds the previous one.
//
// With one thread (or prefetch 0, when Next assembles inline) batches are assembled strictly
// in index order, which a streaming source needs; with more, any thread may assemble any
// index, which needs a source with random access.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <climits>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep::training {

struct Batch {
  Tensor features;  // float32 [rows, num_features]: a view of the first `rows` rows of a buffer
  Tensor labels;    // int32 [rows]
  Tensor targets;   // regression: float32 [rows, num_targets], a view as `features` is; else empty
  int64_t rows = 0;
  int64_t index = 0;        // within the epoch
  int64_t global_rows = 0;  // of the whole global batch: `rows` unless the batch is sharded
  int64_t global_begin = 0;  // where `rows` begin within the global batch
};

// Where a batch is assembled: buffers of batch_size rows; the function sets rows and
// global_rows.
struct BatchBuffers {
  std::span<float> features;
  std::span<int32_t> labels;
  std::span<float> targets;  // batch_size * num_targets
  int64_t rows = 0;
  int64_t global_rows = 0;
  int64_t global_begin = 0;
};

class BatchRing {
 public:
  using AssembleFn = std::function<Status(int64_t index, BatchBuffers& buffers)>;

  // Idle until Start. `assemble` is called from the ring's threads (or from Next when
  // prefetch is 0), never for one index twice in an epoch.
  BatchRing(int64_t batch_size, int64_t num_features, int64_t num_targets, int prefetch, int threads,
            AssembleFn assemble);
  ~BatchRing();
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  // Begins an epoch of `batches`, dropping whatever was in flight; `reset` runs first, while
  // no batch is being assembled, to set up the epoch's order.
  void Start(int64_t batches, const std::function<void()>& reset);
  // Indices not handed out: the next batch Next returns is `count` further on. Batches made
  // ahead (a failed one too) are dropped and made again in their turn. A source that
  // assembles in order sees the gap, or a step back, in the next index it is asked for.
  void Skip(int64_t count);
  // The next batch, or null after the epoch's last one or after an assembly failed (status()).
  const Batch* Next();
  // The first assembly error of the epoch.
  Status status() const;

 private:
  struct Slot {
    Batch batch;
    std::vector<float> features;
    std::vector<int32_t> labels;
    std::vector<float> targets;
    int64_t ready = -1;  // the batch index assembled here, -1 for none
  };

  Status Fill(int64_t index, Slot& slot);
  // Records the failure of batch `index` (lock held): that batch and every later one is
  // never handed out.
  void Fail(int64_t index, Status status);
  void Produce();
  // Stops handing out work and waits until no thread is assembling (lock held).
  void Quiesce(std::unique_lock<std::mutex>& lock);

  const int64_t num_features_;
  const int64_t num_targets_;
  const AssembleFn assemble_;
  std::vector<Slot> slots_;  // batch i in slot i % size

  mutable std::mutex mu_;
  std::condition_variable work_;   // producers wait for a batch to assemble
  std::condition_variable ready_;  // Next and Quiesce wait on producers
  int64_t batches_ = 0;            // this epoch's
  int64_t end_ = 0;                // no batch at or after this is claimed
  int64_t next_to_make_ = 0;
  int64_t next_to_hand_ = 0;  // the batch Next returns next
  int in_flight_ = 0;         // producers assembling now
  bool stopping_ = false;
  Status status_;                  // the failure of batch failed_at_
  int64_t failed_at_ = INT64_MAX;  // the first batch whose assembly failed
  std::vector<std::thread> producers_;
};

}  // namespace lockstep::training
