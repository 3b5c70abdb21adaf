// Tile helpers shared by the AVX-512 kernel files (kernels_avx512.cc, kernels_avx512bf16.cc),
// which are compiled with AVX-512 enabled. Internal linkage only: an inline function with
// external linkage could be merged with a copy compiled for a lesser CPU, or the other way.
#pragma once

#include <immintrin.h>

#include "runtime/matmul/microkernel.h"

namespace lockstep::gemm_internal {
namespace {

constexpr int kAvx512Vecs = kNr / 16;  // zmm per panel row

// The first K block's tile starts from zero; its lines of C are first touched by the stores
// at the end, so they are asked for now (for writing): a miss to L3 or memory then overlaps
// the K loop instead of stalling the stores. Where C is larger than L2 (mlp1.dw, 784 x 1024
// x 256) this took bf16 from 0.87 to 0.97-1.02x oneDNN. A K loop too short to hide the miss
// (K = 10: mlp3.dx) skips the prefetches. A later K block loads the tile. Rows are walked
// with one pointer (see RunTiles).
template <int R, int C>
__attribute__((always_inline)) inline void StartTile(const MicroKernelArgs& g, const float* t,
                                                     __m512 (&acc)[R][C]) {
  const int64_t ldt = g.ldt;
  if (!g.accumulate) {
    const bool prefetch = g.steps >= 32;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r, t += ldt) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        acc[r][c] = _mm512_setzero_ps();
        if (prefetch) __builtin_prefetch(t + c * 16, 1, 3);
      }
    }
    return;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r, t += ldt) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_loadu_ps(t + c * 16);
  }
}

template <int R, int C>
__attribute__((always_inline)) inline void StoreTile(const MicroKernelArgs& g, float* t,
                                                     __m512 (&acc)[R][C]) {
  const int64_t ldt = g.ldt;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r, t += ldt) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(t + c * 16, acc[r][c]);
  }
}

// The loop every AVX-512 kernel shares: for each group (MicroKernelArgs), load the R-row tile,
// apply `step(a, b, acc)` once per k step (the instruction-set-specific part, reading the
// strip's words at `a` and the first panel's at `b`), store the tile. `mr` is the strip
// height; kHalf computes only a panel's first 16 columns (KernelTable::half).
template <int R, int P, bool kHalf, typename Step>
__attribute__((always_inline)) inline void RunTiles(const MicroKernelArgs& g, int mr, Step step) {
  constexpr int V = kHalf ? kAvx512Vecs / 2 : kAvx512Vecs;
  for (int64_t group = 0; group < g.groups; ++group) {
    float* t = g.t + group * g.t_group_stride;
    __m512 acc[R][P * V];
    StartTile<R, P * V>(g, t, acc);
    const uint32_t* a = g.a + group * g.a_group_stride;
    const uint32_t* b = g.b + group * g.b_group_stride;
    for (int64_t s = 0; s < g.steps; ++s, a += mr, b += kNr) step(a, b, acc);
    // The rows' addresses are recomputed here rather than kept from before the loop: held
    // across it, the R row pointers spill (24 accumulators leave few registers), which cost
    // a quarter of the time when K is short. The empty asm hides that t is unchanged.
    asm volatile("" : "+r"(t));
    StoreTile<R, P * V>(g, t, acc);
  }
}

// The loop the direct kernels share (KernelTable::direct_*), as RunTiles with A read in place:
// `step(p, lda, s, b, acc)` once per k step, where row r's word for step s is p[r / 3][(r % 3) *
// lda + s]. Four pointers three rows apart, since x86 addresses base + index * scale: twelve row
// pointers would not fit in the general registers beside the loop's others.
template <int R, int V, typename Step>
__attribute__((always_inline)) inline void RunDirectTiles(const MicroKernelArgs& g, Step step) {
  const int64_t lda = g.lda;
  for (int64_t group = 0; group < g.groups; ++group) {
    float* t = g.t + group * g.t_group_stride;
    __m512 acc[R][V];
    StartTile<R, V>(g, t, acc);
    const uint32_t* a = g.a + group * g.a_group_stride;
    const uint32_t* const p[4] = {a, a + 3 * lda, a + 6 * lda, a + 9 * lda};
    const uint32_t* b = g.b + group * g.b_group_stride;
    for (int64_t s = 0; s < g.steps; ++s, b += kNr) step(p, lda, s, b, acc);
    asm volatile("" : "+r"(t));  // as RunTiles: recompute the rows' addresses
    StoreTile<R, V>(g, t, acc);
  }
}

// Panels per call for a strip of r rows (of 12): as many as keep at most 24 accumulators.
constexpr int Avx512Wide(int r) { return r <= 3 ? 4 : r == 4 ? 3 : r <= 6 ? 2 : 1; }

}  // namespace
}  // namespace lockstep::gemm_internal
