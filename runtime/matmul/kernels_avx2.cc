// AVX2 + FMA micro-kernels: float32, and bfloat16 widened to float32 in registers (two FMAs
// per pair in vdpbf16ps's order). Compiled with -mavx2 -mfma (runtime/CMakeLists.txt); runs
// only where gemm_path.cc found both.
//
// Sixteen ymm registers. A kernel computes its tile in column chunks: as many of the tile's
// 8-column vectors at once as keep the chunk's accumulators, the B vectors and the broadcast A
// values in registers, each chunk over all the K steps before the next (the strip is read
// again from L1). float32 strips are 6 rows: a chunk of 6 x 16 is 12 accumulators, enough
// independent chains to keep both FMA pipes busy through the FMA latency (the 2 x 32 tile
// this replaced had 8: 43 GFLOP/s against OpenBLAS's 66 on 512^3 on a Zen 3; 51 now). bf16
// strips are 4 rows: each step is two dependent FMAs per accumulator, and 4 x 16 is 8
// accumulators beside the B vectors' two halves. The direct kernels (KernelTable::direct_*)
// are the same chunks reading A's rows where they lie. No standard-library code here (see
// kernels_avx512.cc).
#include <immintrin.h>

#include "runtime/matmul/microkernel.h"
#include "runtime/matmul/microkernel_tables.h"

namespace lockstep::gemm_internal {
namespace {

constexpr int kF32Mr = 6;
constexpr int kBf16Mr = 4;
constexpr int kVecs = kNr / 8;  // ymm per panel row

constexpr int Min(int a, int b) { return a < b ? a : b; }

// Vector c of a tile whose panels are `stride` words apart, V vectors per panel.
template <int V>
__attribute__((always_inline)) inline const uint32_t* VectorAt(const uint32_t* b, int64_t stride, int c) {
  return b + (c / V) * stride + (c % V) * 8;
}

// Loads (a later K block) or zeroes the chunk's accumulators: vectors [C0, C0 + CN) of rows R.
template <int R, int CN, int V, int C0>
__attribute__((always_inline)) inline void StartChunk(const MicroKernelArgs& g, const float* t, __m256 (&acc)[R][CN]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CN; ++c) {
      const float* p = t + r * g.ldt + ((C0 + c) / V) * kNr + ((C0 + c) % V) * 8;
      acc[r][c] = g.accumulate ? _mm256_loadu_ps(p) : _mm256_setzero_ps();
    }
  }
}

template <int R, int CN, int V, int C0>
__attribute__((always_inline)) inline void StoreChunk(const MicroKernelArgs& g, float* t, __m256 (&acc)[R][CN]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CN; ++c) _mm256_storeu_ps(t + r * g.ldt + ((C0 + c) / V) * kNr + ((C0 + c) % V) * 8, acc[r][c]);
  }
}

// ---- float32 ----

// Vectors per chunk for R rows: R * CN accumulators, CN B vectors and one broadcast.
constexpr int F32Chunk(int r) { return 15 / (r + 1); }

// A's element for row r, step s: from a packed strip (`lda` 0: a[s * mr + r]) or read in
// place (a[r * lda + s]).
template <bool kDirect>
__attribute__((always_inline)) inline const float* F32At(const float* a, int64_t lda, int r, int64_t s) {
  if constexpr (kDirect) {
    return a + r * lda + s;
  } else {
    return a + s * kF32Mr + r;
  }
}

// Rows R by vectors [C0, C0 + CN) of the tile, all steps, then the next chunk.
template <int R, int V, int kTotal, int C0, bool kDirect>
__attribute__((always_inline)) inline void F32Chunks(const MicroKernelArgs& g, float* t, const float* a,
                                                     const uint32_t* bw) {
  constexpr int CN = Min(F32Chunk(R), kTotal - C0);
  const int64_t stride = g.b_panel_stride;
  __m256 acc[R][CN];
  StartChunk<R, CN, V, C0>(g, t, acc);
  const uint32_t* b = bw;
  for (int64_t s = 0; s < g.steps; ++s, b += kNr) {
    __m256 bv[CN];
#pragma GCC unroll 16
    for (int c = 0; c < CN; ++c) bv[c] = _mm256_loadu_ps(reinterpret_cast<const float*>(VectorAt<V>(b, stride, C0 + c)));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(F32At<kDirect>(a, g.lda, r, s));
#pragma GCC unroll 16
      for (int c = 0; c < CN; ++c) acc[r][c] = _mm256_fmadd_ps(av, bv[c], acc[r][c]);
    }
  }
  StoreChunk<R, CN, V, C0>(g, t, acc);
  if constexpr (C0 + CN < kTotal) F32Chunks<R, V, kTotal, C0 + CN, kDirect>(g, t, a, bw);
}

template <int R, int P, bool kHalf>
struct F32Kernel {
  static void Run(const MicroKernelArgs& g) {
    constexpr int V = kHalf ? kVecs / 2 : kVecs;
    for (int64_t group = 0; group < g.groups; ++group) {
      const float* a = reinterpret_cast<const float*>(g.a + group * g.a_group_stride);
      F32Chunks<R, V, P * V, 0, false>(g, g.t + group * g.t_group_stride, a, g.b + group * g.b_group_stride);
    }
  }
};

// F32Kernel<R, 1, kHalf> reading A in place (MicroKernelArgs::lda; a_group_stride in floats):
// the same multiply-adds in the same order.
template <int R, bool kHalf>
struct F32DirectKernel {
  static void Run(const MicroKernelArgs& g) {
    constexpr int V = kHalf ? kVecs / 2 : kVecs;
    for (int64_t group = 0; group < g.groups; ++group) {
      const float* a = reinterpret_cast<const float*>(g.a) + group * g.a_group_stride;
      F32Chunks<R, V, V, 0, true>(g, g.t + group * g.t_group_stride, a, g.b + group * g.b_group_stride);
    }
  }
};

// Panels per call for a strip of r rows: a short strip takes three panels (what a chunk of its
// accumulators covers in one or a few passes), a full one a panel at a time.
constexpr int F32Wide(int r) { return r <= 3 ? 3 : 1; }

// ---- bfloat16 ----

// The high half of each 32-bit lane (k + 1) and the low half (k), as float32.
__attribute__((always_inline)) inline __m256 High(__m256i x) {
  return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}
__attribute__((always_inline)) inline __m256 Low(__m256i x) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}

// Vectors per chunk for R rows: R * CN accumulators, both halves of CN B vectors, both halves
// of one broadcast pair and the mask.
constexpr int Bf16Chunk(int r) { return 13 / (r + 2); }

// A's pair for row r, step s: from a packed strip (a[s * mr + r]) or read in place (a[r * lda +
// s], lda in words).
template <bool kDirect>
__attribute__((always_inline)) inline uint32_t Bf16At(const uint32_t* a, int64_t lda, int r, int64_t s) {
  if constexpr (kDirect) {
    return a[r * lda + s];
  } else {
    return a[s * kBf16Mr + r];
  }
}

template <int R, int V, int kTotal, int C0, bool kDirect>
__attribute__((always_inline)) inline void Bf16Chunks(const MicroKernelArgs& g, float* t, const uint32_t* a,
                                                      const uint32_t* bw) {
  constexpr int CN = Min(Bf16Chunk(R), kTotal - C0);
  const int64_t stride = g.b_panel_stride;
  __m256 acc[R][CN];
  StartChunk<R, CN, V, C0>(g, t, acc);
  const uint32_t* b = bw;
  for (int64_t s = 0; s < g.steps; ++s, b += kNr) {
    __m256 hi[CN], lo[CN];
#pragma GCC unroll 16
    for (int c = 0; c < CN; ++c) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(VectorAt<V>(b, stride, C0 + c)));
      hi[c] = High(w);
      lo[c] = Low(w);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256i aw = _mm256_set1_epi32(static_cast<int>(Bf16At<kDirect>(a, g.lda, r, s)));
      const __m256 ahi = High(aw), alo = Low(aw);
#pragma GCC unroll 16
      for (int c = 0; c < CN; ++c) {
        acc[r][c] = _mm256_fmadd_ps(ahi, hi[c], acc[r][c]);
        acc[r][c] = _mm256_fmadd_ps(alo, lo[c], acc[r][c]);
      }
    }
  }
  StoreChunk<R, CN, V, C0>(g, t, acc);
  if constexpr (C0 + CN < kTotal) Bf16Chunks<R, V, kTotal, C0 + CN, kDirect>(g, t, a, bw);
}

template <int R, int P, bool kHalf>
struct Bf16Kernel {
  static void Run(const MicroKernelArgs& g) {
    constexpr int V = kHalf ? kVecs / 2 : kVecs;
    for (int64_t group = 0; group < g.groups; ++group) {
      Bf16Chunks<R, V, P * V, 0, false>(g, g.t + group * g.t_group_stride, g.a + group * g.a_group_stride,
                                        g.b + group * g.b_group_stride);
    }
  }
};

// Bf16Kernel<R, 1, kHalf> reading a bf16 A in place (MicroKernelArgs::lda and a_group_stride
// in words: pairs).
template <int R, bool kHalf>
struct Bf16DirectKernel {
  static void Run(const MicroKernelArgs& g) {
    constexpr int V = kHalf ? kVecs / 2 : kVecs;
    for (int64_t group = 0; group < g.groups; ++group) {
      Bf16Chunks<R, V, V, 0, true>(g, g.t + group * g.t_group_stride, g.a + group * g.a_group_stride,
                                   g.b + group * g.b_group_stride);
    }
  }
};

constexpr int Bf16Wide(int r) { return r <= 2 ? 2 : 1; }

}  // namespace

constinit const KernelTable kAvx2F32 =
    WithDirectKernels<F32DirectKernel, kF32Mr>(MakeKernelTable<F32Kernel, kF32Mr, F32Wide>("avx2"));
constinit const KernelTable kAvx2Bf16 =
    WithDirectKernels<Bf16DirectKernel, kBf16Mr>(MakeKernelTable<Bf16Kernel, kBf16Mr, Bf16Wide>("avx2"));

}  // namespace lockstep::gemm_internal
