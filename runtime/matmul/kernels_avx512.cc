// AVX-512F micro-kernels: float32 with FMA, and bfloat16 on CPUs without vdpbf16ps (each pair
// widened to two float32 lanes in registers, then two FMAs in vdpbf16ps's order). Compiled with
// -mavx512f -mfma (runtime/CMakeLists.txt); runs only where gemm_path.cc found AVX-512F.
//
// A tile of 12 rows x 32 columns keeps 24 zmm accumulators; the B panel's vectors and the
// broadcast A values fill the rest of the 32 registers. No standard-library code here: an
// inline function instantiated in this file could be merged with another file's copy and run
// on a CPU without AVX-512.
// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_* idiom).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "runtime/matmul/microkernel.h"
#include "runtime/matmul/microkernel_avx512.h"
#include "runtime/matmul/microkernel_tables.h"

namespace lockstep::gemm_internal {
namespace {

constexpr int kMr = 12;
constexpr int kVecs = kAvx512Vecs;

// The high half of each 32-bit lane (k + 1) and the low half (k), as float32.
__attribute__((always_inline)) inline __m512 High(__m512i x) {
  return _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
__attribute__((always_inline)) inline __m512 Low(__m512i x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
}

template <int R, int P, bool kHalf>
struct F32Kernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    const int64_t stride = g.b_panel_stride;
    auto step = [stride](const uint32_t* aw, const uint32_t* bw, __m512 (&acc)[R][P * V]) {
      const float* a = reinterpret_cast<const float*>(aw);
      const float* b = reinterpret_cast<const float*>(bw);
      __m512 bv[P * V];
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) bv[p * V + v] = _mm512_loadu_ps(b + p * stride + v * 16);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 16
        for (int c = 0; c < P * V; ++c) acc[r][c] = _mm512_fmadd_ps(av, bv[c], acc[r][c]);
      }
    };
    RunTiles<R, P, kHalf>(g, kMr, step);
  }
};

// F32Kernel<R, 1, kHalf> reading A in place (MicroKernelArgs::lda): the same fused
// multiply-adds in the same order.
template <int R, bool kHalf>
struct F32DirectKernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    RunDirectTiles<R, V>(g, [](const uint32_t* const (&p)[4], int64_t lda, int64_t s, const uint32_t* bw,
                               __m512 (&acc)[R][V]) {
      const float* b = reinterpret_cast<const float*>(bw);
      __m512 bv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + v * 16);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(reinterpret_cast<const float*>(p[r / 3])[(r % 3) * lda + s]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    });
  }
};

template <int R, int P, bool kHalf>
struct Bf16Kernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    const int64_t stride = g.b_panel_stride;
    auto step = [stride](const uint32_t* a, const uint32_t* b, __m512 (&acc)[R][P * V]) {
      __m512 hi[P * V], lo[P * V];
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          const __m512i w = _mm512_loadu_si512(b + p * stride + v * 16);
          hi[p * V + v] = High(w);
          lo[p * V + v] = Low(w);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i aw = _mm512_set1_epi32(static_cast<int>(a[r]));
        const __m512 ahi = High(aw), alo = Low(aw);
#pragma GCC unroll 16
        for (int c = 0; c < P * V; ++c) {
          acc[r][c] = _mm512_fmadd_ps(ahi, hi[c], acc[r][c]);
          acc[r][c] = _mm512_fmadd_ps(alo, lo[c], acc[r][c]);
        }
      }
    };
    RunTiles<R, P, kHalf>(g, kMr, step);
  }
};

// Bf16Kernel<R, 1, kHalf> reading a bf16 A in place (lda and a_group_stride in words).
template <int R, bool kHalf>
struct Bf16DirectKernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    RunDirectTiles<R, V>(g, [](const uint32_t* const (&p)[4], int64_t lda, int64_t s, const uint32_t* b,
                               __m512 (&acc)[R][V]) {
      __m512 hi[V], lo[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const __m512i w = _mm512_loadu_si512(b + v * 16);
        hi[v] = High(w);
        lo[v] = Low(w);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i aw = _mm512_set1_epi32(static_cast<int>(p[r / 3][(r % 3) * lda + s]));
        const __m512 ahi = High(aw), alo = Low(aw);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          acc[r][v] = _mm512_fmadd_ps(ahi, hi[v], acc[r][v]);
          acc[r][v] = _mm512_fmadd_ps(alo, lo[v], acc[r][v]);
        }
      }
    });
  }
};

}  // namespace

constinit const KernelTable kAvx512F32 =
    WithDirectKernels<F32DirectKernel, kMr>(MakeKernelTable<F32Kernel, kMr, Avx512Wide>("avx512"));
constinit const KernelTable kAvx512Bf16Emulated =
    WithDirectKernels<Bf16DirectKernel, kMr>(MakeKernelTable<Bf16Kernel, kMr, Avx512Wide>("avx512"));

}  // namespace lockstep::gemm_internal
