// Workers: the processes of a multi-worker run (the mirrored strategy across machines). Each
// worker is one process with its own replicas (mirrored_step.h); a step's gradients are summed
// across the workers after each worker has summed its replicas'.
//
// Sums go in rank order (rank 0's values + rank 1's + ...) on every worker, so every worker
// gets the same bits and a run is repeatable; the workers' weights then stay identical, which
// the trainer checks each epoch. Two implementations: one process alone (nothing to exchange),
// and MPI (OpenMPI from Debian), chosen when the process was started by mpirun.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "runtime/status.h"

namespace lockstep::training {

class Workers {
 public:
  virtual ~Workers() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Replaces `values`, on every worker, by their sum over the workers in rank order. Every
  // worker passes the same length.
  virtual Status SumInRankOrder(std::span<float> values) = 0;
  virtual Status SumInRankOrder(std::span<double> values) = 0;
  // Each worker's `value`, by rank, on every worker.
  virtual Status Gather(uint32_t value, std::span<uint32_t> by_rank) = 0;
  // What the log calls it: "single process" or "mpi rank 1 of 2".
  virtual std::string Describe() const = 0;
  // Ends every worker's process with `code`: one worker's failure must not leave the others
  // waiting for it in a sum. Returns only for a single process.
  virtual void Abort(int code) = 0;
};

// One process alone: rank 0 of 1.
std::unique_ptr<Workers> SingleProcess();

// The workers this process belongs to: MPI's when it was started by mpirun (and model-train
// was built with MPI), else SingleProcess(). Call once, at the start of main: MPI_Init sees
// the arguments. Under mpirun without MPI support built in, fails rather than train N
// independent copies.
StatusOr<std::unique_ptr<Workers>> StartWorkers(int* argc, char*** argv);

}  // namespace lockstep::training
