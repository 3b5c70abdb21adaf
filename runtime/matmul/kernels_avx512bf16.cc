// AVX512_BF16 micro-kernels: vdpbf16ps multiplies a pair of bf16 from A by a pair from B and
// adds both products to a float32 lane, 16 lanes at a time. Compiled with -mavx512f
// -mavx512bf16 (runtime/CMakeLists.txt); runs only where gemm_path.cc found AVX512_BF16.
//
// Tile: 12 rows x 32 columns, 24 zmm accumulators, each A pair broadcast straight from memory
// ({1to16}). No standard-library code here (see kernels_avx512.cc).
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

template <int R, int P, bool kHalf>
struct Bf16Kernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    const int64_t stride = g.b_panel_stride;
    auto step = [stride](const uint32_t* a, const uint32_t* b, __m512 (&acc)[R][P * V]) {
      __m512bh bv[P * V];
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          bv[p * V + v] = (__m512bh)_mm512_loadu_si512(b + p * stride + v * 16);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
#pragma GCC unroll 16
        for (int c = 0; c < P * V; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
      }
    };
    RunTiles<R, P, kHalf>(g, kMr, step);
  }
};

// Bf16Kernel<R, 1, kHalf> reading a bf16 A in place (MicroKernelArgs::lda and a_group_stride in
// words: pairs): the same vdpbf16ps in the same order. A convolution's bf16 columns need no
// packing then.
template <int R, bool kHalf>
struct Bf16DirectKernel {
  static constexpr int V = kHalf ? kVecs / 2 : kVecs;
  static void Run(const MicroKernelArgs& g) {
    RunDirectTiles<R, V>(g, [](const uint32_t* const (&p)[4], int64_t lda, int64_t s, const uint32_t* b,
                               __m512 (&acc)[R][V]) {
      __m512bh bv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + v * 16);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(p[r / 3][(r % 3) * lda + s]));
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
      }
    });
  }
};

}  // namespace

constinit const KernelTable kAvx512Bf16Native =
    WithDirectKernels<Bf16DirectKernel, kMr>(MakeKernelTable<Bf16Kernel, kMr, Avx512Wide>("avx512_bf16"));

}  // namespace lockstep::gemm_internal
