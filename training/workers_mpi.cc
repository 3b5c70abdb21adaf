// Workers over MPI. SumInRankOrder gathers every worker's values (MPI_Allgather) and adds them
// up in rank order on each worker, rather than MPI_Allreduce, whose order of additions MPI
// leaves to the implementation: this way the sum is the same bits on every worker and in
// every run. It moves (workers - 1) times more data than a reduce would, which is nothing at
// two workers and the price of exact repeatability beyond.
// MPI's C API only: its deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <memory>
#include <vector>

#include "training/workers.h"

namespace lockstep::training {
namespace {

class MpiWorkers final : public Workers {
 public:
  MpiWorkers() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiWorkers() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status SumInRankOrder(std::span<float> values) override { return Sum(values, MPI_FLOAT, gathered_f_); }
  Status SumInRankOrder(std::span<double> values) override { return Sum(values, MPI_DOUBLE, gathered_d_); }
  Status Gather(uint32_t value, std::span<uint32_t> by_rank) override {
    if (MPI_Allgather(&value, 1, MPI_UINT32_T, by_rank.data(), 1, MPI_UINT32_T, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
      return Internal("MPI_Allgather failed");
    }
    return Status::Ok();
  }
  void Abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }
  std::string Describe() const override {
    return "mpi rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  }

 private:
  // `gathered` grows once to size x n and is reused, so a step allocates nothing.
  template <typename T>
  Status Sum(std::span<T> values, MPI_Datatype type, std::vector<T>& gathered) {
    const size_t n = values.size();
    if (n == 0) return Status::Ok();
    if (gathered.size() < n * static_cast<size_t>(size_)) gathered.resize(n * static_cast<size_t>(size_));
    if (MPI_Allgather(values.data(), static_cast<int>(n), type, gathered.data(), static_cast<int>(n), type,
                      MPI_COMM_WORLD) != MPI_SUCCESS) {
      return Internal("MPI_Allgather failed");
    }
    for (size_t i = 0; i < n; ++i) values[i] = gathered[i];
    for (int r = 1; r < size_; ++r) {
      const T* other = gathered.data() + static_cast<size_t>(r) * n;
      for (size_t i = 0; i < n; ++i) values[i] += other[i];
    }
    return Status::Ok();
  }

  int rank_ = 0, size_ = 1;
  std::vector<float> gathered_f_;
  std::vector<double> gathered_d_;
};

}  // namespace

StatusOr<std::unique_ptr<Workers>> StartMpiWorkers(int* argc, char*** argv) {
  // Serialized: a batch_norm sum may come from any replica's thread (replica_batch_group.h),
  // never from two at once.
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return Internal("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Internal("MPI cannot be called from more than one thread (MPI_THREAD_SERIALIZED not provided)");
  }
  return std::unique_ptr<Workers>(std::make_unique<MpiWorkers>());
}

}  // namespace lockstep::training
