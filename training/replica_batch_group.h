// ReplicaBatchGroup: the BatchGroup (runtime/batch_group.h) of a mirrored step's replicas,
// and across workers. Each replica's session holds its member; BatchNormTraining sums its
// per-example values through it, so that the statistics are the global batch's, the same bits
// however the batch is cut among replicas and workers.
//
// A sum: every replica of the step with rows hands in its rows and waits; the first of them
// lays the worker's rows in the global batch's order (with other workers, in a buffer of the
// whole global batch, zero outside this worker's rows, summed across the workers in rank order:
// each element then holds exactly its one worker's value), sums the rows in that order, and
// releases the others with the result. Every replica computes the same ops in the same order,
// so their sums meet one for one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/batch_group.h"
#include "training/spin_barrier.h"
#include "training/workers.h"

namespace lockstep::training {

class ReplicaBatchGroup {
 public:
  // `workers`: null when this process is the only worker. Only one thread at a time calls it
  // (each sum's first replica, while the others wait).
  ReplicaBatchGroup(int replicas, Workers* workers);
  ~ReplicaBatchGroup();

  // Replica r's member, for its session's SessionOptions::batch_group.
  BatchGroup* member(int r);

  // Before a step, while no replica runs: the global batch's rows, where this worker's rows
  // begin in it, and each replica's shard of them (begin within the worker's rows, rows).
  // Replicas with no rows take no part.
  void StartStep(int64_t global_rows, int64_t worker_begin, std::span<const int64_t> begins,
                 std::span<const int64_t> rows);
  // A replica's run failed: the replicas waiting in a sum, and any that come later, fail too
  // rather than wait for it.
  void Cancel();

 private:
  class Member;
  Status SumRows(int r, std::span<const double> local, int64_t width, std::span<double> sums);

  Workers* workers_;
  std::vector<std::unique_ptr<Member>> members_;
  std::vector<std::span<const double>> handed_in_;  // per replica, during a sum
  std::vector<int64_t> begins_, rows_;
  int64_t global_rows_ = 0, worker_begin_ = 0;
  int first_ = 0;  // the first replica with rows: it does each sum
  SpinBarrier in_{1}, out_{1};
  std::vector<double> global_;  // with workers: the global batch's rows
  std::vector<double> sums_;
  Status status_;  // of the sum just done
};

}  // namespace lockstep::training
