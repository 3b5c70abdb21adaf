// Lockstep's Gemm behind the comparison's interface: B packed once into a PackedB when the
// shape says it is a weight (as a loaded model does), passed plain otherwise (Gemm then packs
// it per call, as a training step does with its activations and gradients).
#include <cstdlib>

#include "bench/matmul/peers.h"
#include "runtime/matmul/gemm.h"
#include "runtime/matmul/gemm_path.h"
#include "runtime/matmul/packed_b.h"

namespace lockstep::bench {
namespace {

class LockstepMatmul : public PreparedMatmul {
 public:
  LockstepMatmul(const MatmulProblem& problem, ThreadPool* pool) : pool_(pool) {
    const MatmulShape& s = problem.shape;
    const DType type = problem.bf16 ? DType::kBFloat16 : DType::kFloat32;
    args_.transpose_a = s.transpose_a;
    args_.transpose_b = s.transpose_b;
    args_.m = s.m;
    args_.n = s.n;
    args_.k = s.k;
    args_.a = problem.a;
    args_.a_type = type;
    args_.lda = s.lda();
    args_.b = problem.b;
    args_.b_type = type;
    args_.ldb = s.ldb();
    args_.c = problem.c;
    args_.ldc = s.ldc();
    if (s.b_prepacked) {
      packed_ = PackedB::Pack(problem.b, type, s.transpose_b, s.k, s.n, s.ldb(), type, pool);
      args_.packed_b = &packed_;
    }
  }

  void Run() override { Gemm(args_, pool_); }
  std::string Kernel() const override { return std::string(GemmPathName(ActiveGemmPath())); }

 private:
  ThreadPool* pool_;
  PackedB packed_;
  GemmArgs args_;
};

class LockstepLibrary : public MatmulLibrary {
 public:
  std::string_view name() const override { return "lockstep"; }

  std::vector<std::string> Describe() const override {
    std::string supported;
    for (GemmPath path : SupportedGemmPaths()) {
      supported += (supported.empty() ? "" : ", ") + std::string(GemmPathName(path));
    }
    std::vector<std::string> lines = {"Gemm path " + std::string(GemmPathName(ActiveGemmPath())) +
                                      " (this CPU supports: " + supported + ")"};
    if (const char* cap = std::getenv("LOCKSTEP_GEMM_PATH")) {
      lines.push_back(std::string("WARNING: LOCKSTEP_GEMM_PATH=") + cap + " caps the path");
    }
    return lines;
  }

  std::string SetThreads(int threads) override {
    pool_ = std::make_unique<ThreadPool>(threads);
    return "ThreadPool num_threads() = " + std::to_string(pool_->num_threads());
  }

  std::unique_ptr<PreparedMatmul> Prepare(const MatmulProblem& problem) override {
    return std::make_unique<LockstepMatmul>(problem, pool_.get());
  }

 private:
  std::unique_ptr<ThreadPool> pool_ = std::make_unique<ThreadPool>(1);
};

}  // namespace

std::unique_ptr<MatmulLibrary> MakeLockstepLibrary() { return std::make_unique<LockstepLibrary>(); }

}  // namespace lockstep::bench
