#include "runtime/matmul/gemm.h"

#include <algorithm>
#include <span>
#include <vector>

namespace lockstep {
namespace {

// Register tile: kMr rows x kNr columns of C live in accumulators for a whole K block. 4x8
// floats are eight SSE registers, which leaves room for the B row and the broadcast A values
// on baseline x86-64 (the build does not assume AVX).
constexpr int64_t kMr = 4;
constexpr int64_t kNr = 8;
// Cache blocks. A packed B strip (kKc x kNr, 8 KiB) stays in L1 while it meets every A strip
// of the block; the packed A block (kMc x kKc, 64 KiB) and B block (kKc x kNc, 256 KiB) stay
// in L2. One task computes one kMc x kNc block of C.
constexpr int64_t kMc = 64;
constexpr int64_t kNc = 256;
constexpr int64_t kKc = 256;
// Below this many flops a task is not worth handing to another thread.
constexpr int64_t kMinFlopsPerTask = 64 * 1024;

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Per-thread packing buffers. They only grow, so after the first calls on a thread no Gemm
// allocates.
struct Scratch {
  std::vector<float> a, b, t;
};

float* Reserve(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Packs rows [i0, i0+mc) x columns [p0, p0+kc) of op(A) as strips of kMr rows, each strip
// laid out [kc][kMr]. Rows past mc are zero so the micro-kernel never needs an edge case.
void PackA(const GemmArgs& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t s = 0; s < mc; s += kMr) {
    const int64_t rows = std::min(kMr, mc - s);
    float* d = dst + s * kc;
    if (g.transpose_a) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = g.a + (p0 + p) * g.lda + i0 + s;
        for (int64_t r = 0; r < kMr; ++r) d[p * kMr + r] = r < rows ? src[r] : 0.0f;
      }
    } else {
      for (int64_t r = 0; r < kMr; ++r) {
        if (r < rows) {
          const float* src = g.a + (i0 + s + r) * g.lda + p0;
          for (int64_t p = 0; p < kc; ++p) d[p * kMr + r] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) d[p * kMr + r] = 0.0f;
        }
      }
    }
  }
}

// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of op(B) as strips of kNr columns, each strip
// laid out [kc][kNr], zero past nc.
void PackB(const GemmArgs& g, int64_t j0, int64_t nc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t s = 0; s < nc; s += kNr) {
    const int64_t cols = std::min(kNr, nc - s);
    float* d = dst + s * kc;
    if (g.transpose_b) {
      for (int64_t c = 0; c < kNr; ++c) {
        if (c < cols) {
          const float* src = g.b + (j0 + s + c) * g.ldb + p0;
          for (int64_t p = 0; p < kc; ++p) d[p * kNr + c] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) d[p * kNr + c] = 0.0f;
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = g.b + (p0 + p) * g.ldb + j0 + s;
        for (int64_t c = 0; c < kNr; ++c) d[p * kNr + c] = c < cols ? src[c] : 0.0f;
      }
    }
  }
}

// t[kMr x kNr] (leading dimension ldt) += A strip x B strip over kc. Each element is summed
// in plain p order, one multiply and one add per term, so a result never depends on how the
// problem was blocked or threaded.
inline void MicroKernel(int64_t kc, const float* __restrict ap, const float* __restrict bp,
                        float* __restrict t, int64_t ldt, bool first) {
  float acc[kMr][kNr];
  for (int64_t r = 0; r < kMr; ++r) {
    for (int64_t c = 0; c < kNr; ++c) acc[r][c] = first ? 0.0f : t[r * ldt + c];
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float* a = ap + p * kMr;
    const float* b = bp + p * kNr;
    for (int64_t r = 0; r < kMr; ++r) {
      for (int64_t c = 0; c < kNr; ++c) acc[r][c] += a[r] * b[c];
    }
  }
  for (int64_t r = 0; r < kMr; ++r) {
    for (int64_t c = 0; c < kNr; ++c) t[r * ldt + c] = acc[r][c];
  }
}

// One row of the epilogue, each step a separate float operation in the documented order so
// that an unfused graph (MatMul, then BiasAdd, then the activation op) rounds identically.
void EpilogueRow(const GemmArgs& g, int64_t i, int64_t j0, int64_t nc, float* t) {
  float* c = g.c + i * g.ldc + j0;
  if (g.alpha != 1.0f) {
    for (int64_t j = 0; j < nc; ++j) t[j] *= g.alpha;
  }
  if (g.beta != 0.0f) {
    for (int64_t j = 0; j < nc; ++j) t[j] += g.beta * c[j];
  }
  if (const float* bias = g.epilogue.bias) {
    bias += j0;
    for (int64_t j = 0; j < nc; ++j) t[j] += bias[j];
  }
  ApplyActivation(g.epilogue.activation, std::span<float>(t, static_cast<size_t>(nc)));
  if (const float* res = g.epilogue.residual) {
    res += i * g.epilogue.ldr + j0;
    for (int64_t j = 0; j < nc; ++j) c[j] = t[j] + res[j];
  } else {
    std::copy(t, t + nc, c);
  }
}

// Fewer rows than a register tile with B stored [K, N] (batch-1 serving): packing B would cost
// as much as using it, so stream B's rows straight from memory instead. Same summation order
// as MicroKernel (zero, then each term in p order), hence bit-identical results.
void RowBlock(const GemmArgs& g, int64_t i0, int64_t mc, int64_t j0, int64_t nc, float* t) {
  for (int64_t r = 0; r < mc; ++r) {
    const int64_t i = i0 + r;
    const int64_t a_step = g.transpose_a ? g.lda : 1;
    const float* a = g.transpose_a ? g.a + i : g.a + i * g.lda;
    float* __restrict tr = t + r * nc;
    std::fill(tr, tr + nc, 0.0f);
    int64_t p = 0;
    for (; p + 4 <= g.k; p += 4) {
      const float a0 = a[p * a_step], a1 = a[(p + 1) * a_step];
      const float a2 = a[(p + 2) * a_step], a3 = a[(p + 3) * a_step];
      const float* __restrict b0 = g.b + p * g.ldb + j0;
      const float* __restrict b1 = b0 + g.ldb;
      const float* __restrict b2 = b1 + g.ldb;
      const float* __restrict b3 = b2 + g.ldb;
      for (int64_t j = 0; j < nc; ++j) {
        tr[j] = (((tr[j] + a0 * b0[j]) + a1 * b1[j]) + a2 * b2[j]) + a3 * b3[j];
      }
    }
    for (; p < g.k; ++p) {
      const float av = a[p * a_step];
      const float* __restrict b = g.b + p * g.ldb + j0;
      for (int64_t j = 0; j < nc; ++j) tr[j] += av * b[j];
    }
  }
}

// Computes the block of C at rows [i0, i0+mc), columns [j0, j0+nc), epilogue included.
void GemmBlock(const GemmArgs& g, int64_t i0, int64_t mc, int64_t j0, int64_t nc) {
  thread_local Scratch scratch;
  if (mc < kMr && !g.transpose_b) {
    float* t = Reserve(scratch.t, mc * nc);
    RowBlock(g, i0, mc, j0, nc, t);
    for (int64_t r = 0; r < mc; ++r) EpilogueRow(g, i0 + r, j0, nc, t + r * nc);
    return;
  }
  const int64_t mc_pad = RoundUp(mc, kMr);
  const int64_t nc_pad = RoundUp(nc, kNr);
  const int64_t kc_max = std::min(g.k, kKc);
  float* ap = Reserve(scratch.a, mc_pad * kc_max);
  float* bp = Reserve(scratch.b, nc_pad * kc_max);
  float* t = Reserve(scratch.t, mc_pad * nc_pad);
  const int64_t ldt = nc_pad;

  if (g.k == 0) std::fill(t, t + mc_pad * nc_pad, 0.0f);
  for (int64_t p0 = 0; p0 < g.k; p0 += kKc) {
    const int64_t kc = std::min(kKc, g.k - p0);
    PackB(g, j0, nc, p0, kc, bp);
    PackA(g, i0, mc, p0, kc, ap);
    for (int64_t js = 0; js < nc_pad; js += kNr) {
      for (int64_t is = 0; is < mc_pad; is += kMr) {
        MicroKernel(kc, ap + is * kc, bp + js * kc, t + is * ldt + js, ldt, p0 == 0);
      }
    }
  }
  for (int64_t r = 0; r < mc; ++r) EpilogueRow(g, i0 + r, j0, nc, t + r * ldt);
}

}  // namespace

void Gemm(const GemmArgs& g, ThreadPool* pool) {
  if (g.m <= 0 || g.n <= 0) return;
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t flops = 2 * g.m * g.n * std::max<int64_t>(g.k, 1);
  const int64_t num_nb = (g.n + kNc - 1) / kNc;
  // Row blocks are kMc tall unless that leaves too few tasks to keep the pool busy; blocking
  // does not change any result (see MicroKernel), only the speed.
  int64_t mc = kMc;
  if (threads > 1 && flops >= 2 * kMinFlopsPerTask) {
    const int64_t want_mb = std::max<int64_t>(1, (threads * 4 + num_nb - 1) / num_nb);
    mc = std::clamp(RoundUp((g.m + want_mb - 1) / want_mb, kMr), kMr, kMc);
  }
  const int64_t num_mb = (g.m + mc - 1) / mc;
  const int64_t tasks = num_mb * num_nb;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i0 = (task / num_nb) * mc;
      const int64_t j0 = (task % num_nb) * kNc;
      GemmBlock(g, i0, std::min(mc, g.m - i0), j0, std::min(kNc, g.n - j0));
    }
  };
  if (threads == 1 || tasks == 1 || flops < 2 * kMinFlopsPerTask) {
    run(0, tasks);
    return;
  }
  const int64_t flops_per_task = std::max<int64_t>(1, flops / tasks);
  const int64_t grain = std::max<int64_t>(1, kMinFlopsPerTask / flops_per_task);
  pool->ParallelFor(tasks, grain, run);
}

}  // namespace lockstep
