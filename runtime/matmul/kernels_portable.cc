// Portable micro-kernels in plain C++, for CPUs with neither AVX2 nor AVX-512 (and the
// reference every other path is tested against bit for bit). std::fma gives the same single
// rounding as the vector FMA instructions; on x86-64 without FMA hardware it is a library
// call and slow, which is the price of the same answers on every machine.
#include <cmath>
#include <cstring>

#include "runtime/matmul/microkernel.h"
#include "runtime/matmul/microkernel_tables.h"

namespace lockstep::gemm_internal {
namespace {

constexpr int kMr = 4;

float High(uint32_t w) {
  const uint32_t bits = w & 0xffff0000u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float Low(uint32_t w) {
  const uint32_t bits = w << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The loop both kernels share: for each group (MicroKernelArgs), load (or zero, for the first K block) the
// R-row tile, apply `step(a, b, acc)` once per k step, store the tile. kHalf computes only a
// panel's first kNr / 2 columns (KernelTable::half).
template <int R, bool kHalf, typename Step>
void RunTiles(const MicroKernelArgs& g, Step step) {
  constexpr int N = kHalf ? kNr / 2 : kNr;
  for (int64_t group = 0; group < g.groups; ++group) {
    float* t = g.t + group * g.t_group_stride;
    float acc[R][N];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < N; ++c) acc[r][c] = g.accumulate ? t[r * g.ldt + c] : 0.0f;
    }
    const uint32_t* a = g.a + group * g.a_group_stride;
    const uint32_t* b = g.b + group * g.b_group_stride;
    for (int64_t s = 0; s < g.steps; ++s, a += kMr, b += kNr) step(a, b, acc);
    for (int r = 0; r < R; ++r) std::memcpy(t + r * g.ldt, acc[r], sizeof acc[r]);
  }
}

template <int R, int P, bool kHalf>
struct F32Kernel {
  static constexpr int N = kHalf ? kNr / 2 : kNr;
  static void Run(const MicroKernelArgs& g) {
    static_assert(P == 1);
    RunTiles<R, kHalf>(g, [](const uint32_t* a, const uint32_t* b, float (&acc)[R][N]) {
      float bv[N];
      std::memcpy(bv, b, sizeof bv);
      for (int r = 0; r < R; ++r) {
        float av;
        std::memcpy(&av, a + r, sizeof av);
        for (int c = 0; c < N; ++c) acc[r][c] = std::fma(av, bv[c], acc[r][c]);
      }
    });
  }
};

template <int R, int P, bool kHalf>
struct Bf16Kernel {
  static constexpr int N = kHalf ? kNr / 2 : kNr;
  static void Run(const MicroKernelArgs& g) {
    static_assert(P == 1);
    RunTiles<R, kHalf>(g, [](const uint32_t* a, const uint32_t* b, float (&acc)[R][N]) {
      for (int r = 0; r < R; ++r) {
        const float ahi = High(a[r]), alo = Low(a[r]);
        for (int c = 0; c < N; ++c) {
          acc[r][c] = std::fma(ahi, High(b[c]), acc[r][c]);
          acc[r][c] = std::fma(alo, Low(b[c]), acc[r][c]);
        }
      }
    });
  }
};

constexpr int Wide(int) { return 1; }

}  // namespace

constinit const KernelTable kPortableF32 = MakeKernelTable<F32Kernel, kMr, Wide>("portable");
constinit const KernelTable kPortableBf16 = MakeKernelTable<Bf16Kernel, kMr, Wide>("portable");

}  // namespace lockstep::gemm_internal
