#include "runtime/ops/conv_direct.h"

#include <algorithm>
#include <cmath>

#include "runtime/activation.h"
#include "runtime/matmul/gemm_path.h"
#include "runtime/ops/op_util.h"

namespace lockstep {
namespace {

constexpr int64_t kMaxCin = 4;
constexpr int kLanes = 16;
// Output columns a group holds at most: 4 vectors of 16.
constexpr int kMaxVectors = 4;

struct DirectArgs {
  const Geometry* g;
  int64_t cout;
  const float* in;
  const float* filter;
  GemmEpilogue epilogue;
  float* out;
};

// What a tap over the padding reads.
constexpr float kZeros[kMaxCin] = {};

// Output pixels [ow, ow + P) of output row (n, oh), output channels [col0, col0 + V * 16): the
// products' sums plus bias and residual, stored (the activation comes after the whole row).
// kC: the input channels (1 to kMaxCin, so the channel loop unrolls).
template <int P, int V, int kC>
[[gnu::always_inline]] inline void Group(const DirectArgs& a, int64_t n, int64_t oh, int64_t ow, int64_t col0) {
  const Geometry& g = *a.g;
  constexpr int kCols = V * kLanes;
  float acc[P][kCols];
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 64
    for (int l = 0; l < kCols; ++l) acc[p][l] = 0.0f;
  }
  // Whether every window of the group lies inside the image's columns: then pixel p's taps are
  // pixel 0's moved by p strides, with no test per pixel and tap (those tests took as long as
  // the multiply-adds of a 3-channel stem).
  const int64_t left = ow * g.sw - g.ww.pad_before;
  const bool columns_inside = left >= 0 && left + (P - 1) * g.sw + (g.kw - 1) * g.dw < g.w;
  const int64_t pixel_step = g.sw * kC;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = oh * g.sh - g.wh.pad_before + i * g.dh;
    const bool row_inside = ih >= 0 && ih < g.h;
    const float* image_row = a.in + (n * g.h + (row_inside ? ih : 0)) * g.w * kC;
    for (int64_t j = 0; j < g.kw; ++j) {
      const float* x[P];
      if (row_inside && columns_inside) {
        const float* first = image_row + (left + j * g.dw) * kC;
#pragma GCC unroll 32
        for (int p = 0; p < P; ++p) x[p] = first + p * pixel_step;
      } else {
#pragma GCC unroll 32
        for (int p = 0; p < P; ++p) {
          const int64_t iw = left + p * g.sw + j * g.dw;
          x[p] = row_inside && iw >= 0 && iw < g.w ? image_row + iw * kC : kZeros;
        }
      }
      const float* f = a.filter + (i * g.kw + j) * kC * a.cout + col0;
#pragma GCC unroll 4
      for (int c = 0; c < kC; ++c, f += a.cout) {
#pragma GCC unroll 32
        for (int p = 0; p < P; ++p) {
          const float xv = x[p][c];
#pragma GCC unroll 64
          for (int l = 0; l < kCols; ++l) acc[p][l] = std::fma(xv, f[l], acc[p][l]);
        }
      }
    }
  }
  const int64_t pixel0 = (n * g.wh.out + oh) * g.ww.out + ow;
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
    float* o = a.out + (pixel0 + p) * a.cout + col0;
    if (const float* bias = a.epilogue.bias) {
#pragma GCC unroll 64
      for (int l = 0; l < kCols; ++l) acc[p][l] += bias[col0 + l];
    }
    if (const float* res = a.epilogue.residual) {
      res += (pixel0 + p) * a.epilogue.ldr + col0;
#pragma GCC unroll 64
      for (int l = 0; l < kCols; ++l) acc[p][l] += res[l];
    }
#pragma GCC unroll 64
    for (int l = 0; l < kCols; ++l) o[l] = acc[p][l];
  }
}

// Output columns [col0, col0 + V * 16) of a row: groups of P pixels, then of 4, then single.
template <int P, int V, int kC>
[[gnu::always_inline]] inline void RowColumns(const DirectArgs& a, int64_t n, int64_t oh, int64_t col0) {
  const int64_t width = a.g->ww.out;
  int64_t ow = 0;
  for (; ow + P <= width; ow += P) Group<P, V, kC>(a, n, oh, ow, col0);
  if constexpr (P > 4) {
    for (; ow + 4 <= width; ow += 4) Group<4, V, kC>(a, n, oh, ow, col0);
  }
  for (; ow < width; ++ow) Group<1, V, kC>(a, n, oh, ow, col0);
}

// Output rows [begin, end) of the flattened (n, oh). kBudget: accumulator vectors of 16 lanes a
// group may hold (the registers of the instruction set).
template <int kBudget, int kC>
[[gnu::always_inline]] inline void RowsOf(const DirectArgs& a, int64_t begin, int64_t end) {
  const Geometry& g = *a.g;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / g.wh.out, oh = row % g.wh.out;
    for (int64_t col0 = 0; col0 < a.cout; col0 += kMaxVectors * kLanes) {
      switch (std::min<int64_t>(kMaxVectors, (a.cout - col0) / kLanes)) {
        case 1: RowColumns<std::max(1, kBudget), 1, kC>(a, n, oh, col0); break;
        case 2: RowColumns<std::max(1, kBudget / 2), 2, kC>(a, n, oh, col0); break;
        case 3: RowColumns<std::max(1, kBudget / 3), 3, kC>(a, n, oh, col0); break;
        default: RowColumns<std::max(1, kBudget / 4), 4, kC>(a, n, oh, col0); break;
      }
    }
    // The row's activation while it is in cache.
    float* out_row = a.out + row * g.ww.out * a.cout;
    ApplyActivation(a.epilogue.activation, out_row, out_row, g.ww.out * a.cout);
  }
}

template <int kBudget>
[[gnu::always_inline]] inline void Rows(const DirectArgs& a, int64_t begin, int64_t end) {
  switch (a.g->c) {
    case 1: return RowsOf<kBudget, 1>(a, begin, end);
    case 2: return RowsOf<kBudget, 2>(a, begin, end);
    case 3: return RowsOf<kBudget, 3>(a, begin, end);
    default: return RowsOf<kBudget, kMaxCin>(a, begin, end);
  }
}

using RowsFn = void (*)(const DirectArgs&, int64_t, int64_t);

void RowsBaseline(const DirectArgs& a, int64_t begin, int64_t end) { Rows<2>(a, begin, end); }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void RowsAvx2(const DirectArgs& a, int64_t begin, int64_t end) {
  Rows<6>(a, begin, end);
}
__attribute__((target("avx512f,fma"))) void RowsAvx512(const DirectArgs& a, int64_t begin, int64_t end) {
  Rows<24>(a, begin, end);
}
#endif

RowsFn ChooseRows() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (ActiveGemmPath()) {
    case GemmPath::kAvx512:
    case GemmPath::kAvx512Bf16: return RowsAvx512;
    case GemmPath::kAvx2: return RowsAvx2;
    case GemmPath::kPortable: break;
  }
#endif
  return RowsBaseline;
}

}  // namespace

bool DirectConvApplies(int64_t cin, int64_t cout) {
  return cin >= 1 && cin <= kMaxCin && cout > 0 && cout % kLanes == 0;
}

void DirectConv(const Geometry& g, int64_t cout, const float* in, const float* filter, const GemmEpilogue& epilogue,
                float* out, ThreadPool& pool) {
  const DirectArgs args{&g, cout, in, filter, epilogue, out};
  const RowsFn rows = ChooseRows();
  const int64_t row_cost = std::max<int64_t>(1, g.ww.out * cout * g.kh * g.kw * g.c);
  pool.ParallelFor(g.n * g.wh.out, std::max<int64_t>(1, kElementGrain / row_cost),
                   [&](int64_t begin, int64_t end) { rows(args, begin, end); });
}

}  // namespace lockstep
