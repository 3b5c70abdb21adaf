// Eigen 3.4, float32 only (its bfloat16 products are scalar emulation, no peer for anything).
//
// The trap this file avoids: `C.noalias() = A * B` builds a fresh gemm_blocking_space on every
// call, so each call allocates (and first-touches) its packing buffers, which costs up to 5x at
// some sizes and measures malloc rather than Eigen's kernels. Here the blocking space lives as
// long as the prepared problem and the product runs through the same internal entry points the
// expression uses (general_matrix_matrix_product, parallelize_gemm). One allocation Eigen keeps
// regardless: with more than one thread, each thread's packed-B block is a per-call local
// (stack up to 128 KiB, heap above), which is how Eigen's parallel product is written.
//
// Eigen picks its SIMD at compile time: this one file is compiled with
// LOCKSTEP_BENCH_EIGEN_FLAGS (default -march=native; baseline x86-64 would give it SSE2 only)
// and with OpenMP, which is the only way Eigen runs a product on more than one thread.
#include <Eigen/Core>
#include <algorithm>

#include "bench/matmul/peers.h"

namespace lockstep::bench {
namespace {

using Eigen::Index;
namespace internal = Eigen::internal;

// A stored [K, M] row-major is [M, K] column-major, so a transpose is only a storage order.
template <int LhsOrder, int RhsOrder>
class EigenMatmul : public PreparedMatmul {
  using Gemm = internal::general_matrix_matrix_product<Index, float, LhsOrder, false, float, RhsOrder, false,
                                                       Eigen::RowMajor, 1>;
  using Blocking =
      internal::gemm_blocking_space<Eigen::RowMajor, float, float, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic>;

  // Eigen's gemm_functor over raw pointers and the persistent blocking space.
  struct Functor {
    using Traits = typename Gemm::Traits;
    EigenMatmul& g;

    void initParallelSession(Index threads) const {
      // Recomputes the same block sizes on every call (same shape, same threads), so the A
      // block allocated on the first call fits all later ones; allocateA is a no-op after it.
      g.blocking_.initParallel(g.s_.m, g.s_.n, g.s_.k, threads);
      g.blocking_.allocateA();
    }
    void operator()(Index row, Index rows, Index col = 0, Index cols = -1,
                    internal::GemmParallelInfo<Index>* info = nullptr) const {
      if (cols == -1) cols = g.s_.n;
      const Index a_row_step = LhsOrder == Eigen::RowMajor ? g.s_.lda() : 1;
      const Index b_col_step = RhsOrder == Eigen::RowMajor ? 1 : g.s_.ldb();
      Gemm::run(rows, cols, g.s_.k, g.a_ + row * a_row_step, g.s_.lda(), g.b_ + col * b_col_step, g.s_.ldb(),
                g.c_ + row * g.s_.ldc() + col, 1, g.s_.ldc(), 1.0f, g.blocking_, info);
    }
  };

 public:
  EigenMatmul(const MatmulProblem& p, int threads)
      : s_(p.shape),
        a_(static_cast<const float*>(p.a)),
        b_(static_cast<const float*>(p.b)),
        c_(p.c),
        blocking_(s_.m, s_.n, s_.k, 1, true) {
    // Single-threaded, the sequential path takes both blocks from the blocking space when they
    // are there, so allocate them now. With threads, initParallelSession sizes them instead.
    if (threads == 1) blocking_.allocateAll();
  }

  void Run() override {
    // What `C.noalias() = A * B` does: zero C, then C += A * B.
    std::fill_n(c_, s_.c_elements(), 0.0f);
    if (s_.m == 1) {
      // Eigen turns a one-row product into a matrix-vector product, which packs nothing.
      using Rhs = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, RhsOrder>;
      Eigen::Map<const Eigen::RowVectorXf> a(a_, s_.k);
      Eigen::Map<const Rhs, 0, Eigen::OuterStride<>> b(b_, s_.k, s_.n, Eigen::OuterStride<>(s_.ldb()));
      Eigen::Map<Eigen::RowVectorXf> c(c_, s_.n);
      c.noalias() += a * b;
      return;
    }
    internal::parallelize_gemm<true>(Functor{*this}, Index{s_.m}, Index{s_.n}, Index{s_.k}, /*transpose=*/true);
  }

 private:
  const MatmulShape& s_;
  const float* a_;
  const float* b_;
  float* c_;
  Blocking blocking_;
};

class EigenLibrary : public MatmulLibrary {
 public:
  std::string_view name() const override { return "eigen"; }

  std::vector<std::string> Describe() const override {
    return {"Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                std::to_string(EIGEN_MINOR_VERSION) + ", SIMD " + Eigen::SimdInstructionSetsInUse() +
#ifdef EIGEN_HAS_OPENMP
                ", OpenMP threads",
#else
                ", NO OpenMP: one thread whatever the table says",
#endif
            "float32 only (bf16 n/a: Eigen's bfloat16 product is scalar); packing buffers kept per problem"};
  }

  std::string SetThreads(int threads) override {
    Eigen::setNbThreads(threads);
    threads_ = threads;
    return "Eigen::nbThreads() = " + std::to_string(Eigen::nbThreads());
  }

  std::unique_ptr<PreparedMatmul> Prepare(const MatmulProblem& p) override {
    if (p.bf16) return nullptr;
    const bool lhs_row = !p.shape.transpose_a, rhs_row = !p.shape.transpose_b;
    if (lhs_row && rhs_row) return std::make_unique<EigenMatmul<Eigen::RowMajor, Eigen::RowMajor>>(p, threads_);
    if (lhs_row) return std::make_unique<EigenMatmul<Eigen::RowMajor, Eigen::ColMajor>>(p, threads_);
    if (rhs_row) return std::make_unique<EigenMatmul<Eigen::ColMajor, Eigen::RowMajor>>(p, threads_);
    return std::make_unique<EigenMatmul<Eigen::ColMajor, Eigen::ColMajor>>(p, threads_);
  }

 private:
  int threads_ = 1;
};

}  // namespace

std::unique_ptr<MatmulLibrary> MakeEigenLibrary() { return std::make_unique<EigenLibrary>(); }

}  // namespace lockstep::bench
