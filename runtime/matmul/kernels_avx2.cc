// AVX2 + FMA micro-kernels: float32, and bfloat16 widened to float32 in registers (two FMAs
// per pair in vdpbf16ps's order). Compiled with -mavx2 -mfma (runtime/CMakeLists.txt); runs
// only where gemm_path.cc found both.
//
// Sixteen ymm registers: a tile of 2 rows x 32 columns is 8 accumulators, leaving room for a
// B vector and the broadcast A values. No standard-library code here (see kernels_avx512.cc).
#include <immintrin.h>

#include "runtime/matmul/microkernel.h"
#include "runtime/matmul/microkernel_tables.h"

namespace lockstep::gemm_internal {
namespace {

constexpr int kMr = 2;
constexpr int kVecs = 4;  // ymm per panel row (kNr / 8)

// The loop both kernels share: for each group (MicroKernelArgs), load (or zero, for the first K
// block) the R-row tile, apply `step(a, b, acc)` once per k step, store the tile. kHalf
// computes only a panel's first 16 columns (KernelTable::half).
template <int R, int P, bool kHalf, typename Step>
__attribute__((always_inline)) inline void RunTiles(const MicroKernelArgs& g, Step step) {
  constexpr int C = P * (kHalf ? kVecs / 2 : kVecs);
  const int64_t ldt = g.ldt;
  for (int64_t group = 0; group < g.groups; ++group) {
    float* t = g.t + group * g.t_group_stride;
    __m256 acc[R][C];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        acc[r][c] = g.accumulate ? _mm256_loadu_ps(t + r * ldt + c * 8) : _mm256_setzero_ps();
      }
    }
    const uint32_t* a = g.a + group * g.a_group_stride;
    const uint32_t* b = g.b + group * g.b_group_stride;
    for (int64_t s = 0; s < g.steps; ++s, a += kMr, b += kNr) step(a, b, acc);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) _mm256_storeu_ps(t + r * ldt + c * 8, acc[r][c]);
    }
  }
}

template <int R, int P, bool kHalf>
struct F32Kernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    const int64_t stride = g.b_panel_stride;
    auto step = [stride](const uint32_t* aw, const uint32_t* bw, __m256 (&acc)[R][P * V]) {
      const float* a = reinterpret_cast<const float*>(aw);
      const float* b = reinterpret_cast<const float*>(bw);
      __m256 av[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) av[r] = _mm256_broadcast_ss(a + r);
#pragma GCC unroll 16
      for (int c = 0; c < P * V; ++c) {
        const __m256 bv = _mm256_loadu_ps(b + (c / V) * stride + (c % V) * 8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(av[r], bv, acc[r][c]);
      }
    };
    RunTiles<R, P, kHalf>(g, step);
  }
};

// The high half of each 32-bit lane (k + 1) and the low half (k), as float32.
__attribute__((always_inline)) inline __m256 High(__m256i x) {
  return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}
__attribute__((always_inline)) inline __m256 Low(__m256i x) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}

template <int R, int P, bool kHalf>
struct Bf16Kernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    const int64_t stride = g.b_panel_stride;
    auto step = [stride](const uint32_t* a, const uint32_t* b, __m256 (&acc)[R][P * V]) {
      __m256 ahi[R], alo[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m256i aw = _mm256_set1_epi32(static_cast<int>(a[r]));
        ahi[r] = High(aw);
        alo[r] = Low(aw);
      }
#pragma GCC unroll 16
      for (int c = 0; c < P * V; ++c) {
        const uint32_t* src = b + (c / V) * stride + (c % V) * 8;
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        const __m256 hi = High(w), lo = Low(w);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          acc[r][c] = _mm256_fmadd_ps(ahi[r], hi, acc[r][c]);
          acc[r][c] = _mm256_fmadd_ps(alo[r], lo, acc[r][c]);
        }
      }
    };
    RunTiles<R, P, kHalf>(g, step);
  }
};

// A single row covers two panels, so it too has eight accumulators.
constexpr int Wide(int r) { return r == 1 ? 2 : 1; }

}  // namespace

constinit const KernelTable kAvx2F32 = MakeKernelTable<F32Kernel, kMr, Wide>("avx2");
constinit const KernelTable kAvx2Bf16 = MakeKernelTable<Bf16Kernel, kMr, Wide>("avx2");

}  // namespace lockstep::gemm_internal
