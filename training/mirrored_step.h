// MirroredStep: the mirrored strategy on one machine. N replicas, each a thread with its own
// GradientStep (its own session over the same training graph, and its own intra-op pool, so
// that replicas times intra-op threads is the core count), take one global batch at a time:
// the batch is cut into N contiguous shards, each replica computes the gradient of its shard's
// mean loss, and the all-reduce combines them into the gradient of the global batch's mean
// loss: each shard's gradient weighted by its share of the rows, summed in replica order.
// Every element is summed in that one order whatever the threads' timing, so a run gives the
// same bits every time; and because the reduction is a mean, the learning rate does not change
// with N.
//
// Each weight matrix a product reads is packed for the matmul core once per step, the
// packings shared out among the replicas and then read by all of them, rather than packed by
// every replica for its own products: the per-weight work does not grow with the replicas.
//
// The replicas' weights are one copy in shared memory (with, under bf16, one bf16 copy of each
// product weight: TrainingWeights): the replicas only read it while they compute, and the
// update writes it once they all have (during the reduction, or after the step), so they are
// identical by construction. (Across processes,
// each rank holds its own copy: cross_replica.h.)
//
// A warmed-up step allocates nothing: the replica threads live as long as the step, and the
// reduced gradients have their buffers from the start.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "runtime/matmul/packed_b.h"
#include "runtime/thread_pool.h"
#include "training/gradient_step.h"
#include "training/replica_batch_group.h"
#include "training/spin_barrier.h"

namespace lockstep::training {

class MirroredStep {
 public:
  struct Options {
    int replicas = 1;
    int threads_per_replica = 1;  // each replica's intra-op pool, the replica's thread included
    // Multi-worker: this worker's replicas are numbered from here (their dropout masks differ
    // from every other worker's), and the gradients always land in one contiguous buffer,
    // ready to be summed across the workers.
    int first_replica = 0;
    bool multi_worker = false;
    // The workers, when there are several: a model with batch_norm sums its statistics across
    // them (replica_batch_group.h). Must outlive the step.
    Workers* workers = nullptr;
  };

  static StatusOr<std::unique_ptr<MirroredStep>> Create(const TrainConfig& config, const ModelLayout& layout,
                                                        const WeightMap& weights, const FeatureStats& stats,
                                                        Options options);
  ~MirroredStep();
  MirroredStep(const MirroredStep&) = delete;
  MirroredStep& operator=(const MirroredStep&) = delete;

  // What to do with each stretch of a reduced gradient: (weight index, element range).
  using ReducedFn = std::function<void(size_t weight, int64_t begin, int64_t end)>;

  // Runs every replica on its shard of `batch` at once, then the all-reduce. A replica whose
  // shard is empty (a batch of fewer rows than replicas) sits the step out. When the batch is
  // one worker's shard of a global batch, shares are of the global batch (Batch::global_rows),
  // so the workers' results add up to the global batch's.
  //
  // `on_reduced`, when given, is called by the replica threads on each stretch of each gradient
  // as soon as it is reduced, while it is in cache: every element exactly once, and only when
  // every replica succeeded. The trainer updates the weights there (Optimizer::UpdateRange), so
  // the update runs on the replicas' cores in the same pass as the reduction. Only for a step
  // that reduces_locally().
  Status Run(const Batch& batch, int64_t dropout_seed, const ReducedFn* on_reduced = nullptr);

  // Whether Run's all-reduce gives the global batch's gradients by itself: more than one
  // replica, one worker. (One replica's gradients need no reduction; a worker's must still be
  // summed with the other workers'.)
  bool reduces_locally() const { return replicas_.size() > 1 && !multi_worker_; }

  // Of the last run, over the whole batch: the mean loss, the rows the model got right, and
  // each weight's gradient (parallel to layout.weights; valid until the next run).
  double loss() const { return loss_; }
  int64_t correct() const { return correct_; }
  double squared_error() const { return squared_error_; }    // regression: summed over rows and targets
  double absolute_error() const { return absolute_error_; }  // likewise
  std::span<const std::span<float>> gradients() const { return gradients_; }
  // The global batch's statistic for each state of the layout (the same on every replica).
  std::span<const std::span<const float>> batch_state() const;
  // Every gradient, one after another, when they are in one buffer (more than one replica,
  // or multi_worker); empty otherwise. Writable: the workers' sum replaces it in place.
  std::span<float> flat_gradients() { return flat_; }

  int replicas() const { return static_cast<int>(replicas_.size()); }

  struct Replica;
  MirroredStep(std::vector<std::unique_ptr<Replica>> replicas, std::unique_ptr<ReplicaBatchGroup> group,
               const ModelLayout& layout, const Options& options);

 private:
  void ReplicaLoop(int r);
  // Runs replica r on its shard, then reduces its slice of every gradient.
  void RunReplica(int r);

  std::unique_ptr<ReplicaBatchGroup> group_;  // with batch_norm across replicas or workers; else null
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<int64_t> shard_begins_, shard_rows_;  // per replica, for the group
  const int first_replica_;
  const bool multi_worker_;
  std::vector<float> flat_;                // the reduced gradients, when contiguous
  std::vector<std::span<float>> reduced_;  // per weight, into flat_
  std::vector<std::span<float>> gradients_;
  // Each weight a product packs, packed once per step for every replica (GradientStep's pack
  // sites; replica r packs sites r, r + n, ...), before any replica computes.
  std::vector<PackedB> packs_;
  std::vector<const PackedB*> pack_ptrs_;
  std::unique_ptr<SpinBarrier> start_, packed_, computed_, reduced_barrier_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  const Batch* batch_ = nullptr;  // the step's batch, set before start_
  int64_t total_rows_ = 0;        // the global batch's rows
  int64_t dropout_seed_ = 0;
  const ReducedFn* on_reduced_ = nullptr;
  double loss_ = 0;
  int64_t correct_ = 0;
  double squared_error_ = 0, absolute_error_ = 0;
};

}  // namespace lockstep::training
