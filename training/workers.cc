#include "training/workers.h"

#include <cstdlib>
#include <cstring>

namespace lockstep::training {
namespace {

class SingleProcessWorkers final : public Workers {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status SumInRankOrder(std::span<float>) override { return Status::Ok(); }
  Status SumInRankOrder(std::span<double>) override { return Status::Ok(); }
  Status Gather(uint32_t value, std::span<uint32_t> by_rank) override {
    by_rank[0] = value;
    return Status::Ok();
  }
  std::string Describe() const override { return "single process"; }
  void Abort(int) override {}
};

}  // namespace

std::unique_ptr<Workers> SingleProcess() {
  return std::make_unique<SingleProcessWorkers>();
}

#ifdef LOCKSTEP_HAVE_MPI
StatusOr<std::unique_ptr<Workers>> StartMpiWorkers(int* argc, char*** argv);  // workers_mpi.cc
#endif

StatusOr<std::unique_ptr<Workers>> StartWorkers(int* argc, char*** argv) {
  // mpirun (OpenMPI, or another launcher speaking PMI) says so in the environment.
  const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
                        std::getenv("PMI_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
  if (!launched) return SingleProcess();
#ifdef LOCKSTEP_HAVE_MPI
  return StartMpiWorkers(argc, argv);
#else
  (void)argc;
  (void)argv;
  return FailedPrecondition(
      "started by mpirun, but this model-train was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

}  // namespace lockstep::training
