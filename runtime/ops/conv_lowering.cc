#include "runtime/ops/conv_lowering.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/bfloat16.h"
#include "runtime/ops/op_util.h"

namespace lockstep {

namespace {

template <typename T>
void Im2ColT(const Geometry& g, const T* in, int64_t row0, int64_t rows, T* dst) {
  const int64_t oh_n = g.wh.out, ow_n = g.ww.out;
  const int64_t kdim = g.kh * g.kw * g.c;
  // The row's pixel, stepped along rather than divided out of the row index for each row.
  int64_t ow = row0 % ow_n, oh = (row0 / ow_n) % oh_n, n = row0 / (ow_n * oh_n);
  for (int64_t r = 0; r < rows; ++r, ow = ow + 1 < ow_n ? ow + 1 : 0) {
    if (r > 0 && ow == 0 && ++oh == oh_n) {
      oh = 0;
      ++n;
    }
    T* d = dst + r * kdim;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ih = oh * g.sh - g.wh.pad_before + i * g.dh;
      if (ih < 0 || ih >= g.h) {
        std::fill(d, d + g.kw * g.c, T{});
        d += g.kw * g.c;
        continue;
      }
      const T* src_row = in + (n * g.h + ih) * g.w * g.c;
      const int64_t iw0 = ow * g.sw - g.ww.pad_before;
      if (g.dw == 1 && iw0 >= 0 && iw0 + g.kw <= g.w) {
        // The window's row lies inside the image: KW pixels that are adjacent in NHWC, one
        // copy (a stem's 7 x 3 channels were 7 calls of 12 bytes).
        std::memcpy(d, src_row + iw0 * g.c, static_cast<size_t>(g.kw * g.c) * sizeof(T));
        d += g.kw * g.c;
        continue;
      }
      for (int64_t j = 0; j < g.kw; ++j, d += g.c) {
        const int64_t iw = ow * g.sw - g.ww.pad_before + j * g.dw;
        if (iw < 0 || iw >= g.w) {
          std::fill(d, d + g.c, T{});
        } else {
          std::memcpy(d, src_row + iw * g.c, static_cast<size_t>(g.c) * sizeof(T));
        }
      }
    }
  }
}

}  // namespace

void Im2Col(const Geometry& g, const float* in, int64_t row0, int64_t rows, float* dst) {
  Im2ColT(g, in, row0, rows, dst);
}

void Im2Col(const Geometry& g, const uint16_t* in, int64_t row0, int64_t rows, uint16_t* dst) {
  Im2ColT(g, in, row0, rows, dst);
}

const uint16_t* RoundedToBf16(const float* x, int64_t count, int slot) {
  thread_local std::vector<bfloat16> buffers[2];
  std::vector<bfloat16>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < count) b.resize(static_cast<size_t>(count));
  FloatToBfloat16(std::span<const float>(x, static_cast<size_t>(count)), std::span<bfloat16>(b.data(), static_cast<size_t>(count)));
  return reinterpret_cast<const uint16_t*>(b.data());
}

uint16_t* Bf16Scratch(int64_t elements) { return reinterpret_cast<uint16_t*>(ThreadScratch((elements + 1) / 2)); }

void Col2ImAdd(const Geometry& g, const float* col, int64_t row0, int64_t rows, float* dx) {
  const int64_t oh_n = g.wh.out, ow_n = g.ww.out;
  const int64_t kdim = g.kh * g.kw * g.c;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = row0 + r;
    const int64_t ow = row % ow_n;
    const int64_t oh = (row / ow_n) % oh_n;
    const int64_t n = row / (ow_n * oh_n);
    const float* s = col + r * kdim;
    for (int64_t i = 0; i < g.kh; ++i, s += g.kw * g.c) {
      const int64_t ih = oh * g.sh - g.wh.pad_before + i * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      float* dst_row = dx + (n * g.h + ih) * g.w * g.c;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t iw = ow * g.sw - g.ww.pad_before + j * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        float* __restrict d = dst_row + iw * g.c;
        const float* __restrict v = s + j * g.c;
        for (int64_t k = 0; k < g.c; ++k) d[k] += v[k];
      }
    }
  }
}

Blocks ImageBlocks(const Geometry& g, int64_t threads, bool spread) {
  const int64_t kdim = std::max<int64_t>(g.kh * g.kw * g.c, 1);
  const int64_t pixels = std::max<int64_t>(g.pixels_per_image(), 1);
  int64_t rows = std::max(kMinBlockRows, kIm2colFloats / kdim);
  if (spread && threads > 1) rows = std::min(rows, std::max(kMinBlockRows, g.n * pixels / (threads * 4)));
  Blocks b;
  b.images_per_block = std::clamp<int64_t>(rows / pixels, 1, std::max<int64_t>(g.n, 1));
  b.count = (g.n + b.images_per_block - 1) / b.images_per_block;
  return b;
}

namespace {

// dst[i][j][co][ci] = src[KH-1-i][KW-1-j][ci][co], elements copied as their bits.
template <typename Bits>
void FlipFilter(const Bits* src, Bits* dst, const Geometry& g, int64_t cout) {
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      const Bits* tap = src + ((g.kh - 1 - i) * g.kw + (g.kw - 1 - j)) * g.c * cout;
      Bits* d = dst + (i * g.kw + j) * cout * g.c;
      for (int64_t co = 0; co < cout; ++co) {
        for (int64_t ci = 0; ci < g.c; ++ci) d[co * g.c + ci] = tap[ci * cout + co];
      }
    }
  }
}

}  // namespace

StridedOneTranspose TransposedConvolution(const Geometry& g, const Tensor& filter) {
  StridedOneTranspose t;
  const int64_t pad_h = (g.kh - 1) * g.dh - g.wh.pad_before, pad_w = (g.kw - 1) * g.dw - g.ww.pad_before;
  if (pad_h < 0 || pad_w < 0) return t;  // a forward pad past the window's extent: col2im
  const int64_t cout = g.out.dim(3);
  t.g = g;
  t.g.h = g.wh.out;
  t.g.w = g.ww.out;
  t.g.c = cout;
  t.g.wh = Window{g.h, pad_h};
  t.g.ww = Window{g.w, pad_w};
  t.g.out = Shape{g.n, g.h, g.w, g.c};
  const size_t bytes = static_cast<size_t>(filter.num_elements()) * DTypeSize(filter.dtype());
  thread_local std::vector<uint32_t> flipped;  // words: float32 or bf16 pairs, aligned for both
  flipped.resize((bytes + 3) / 4);
  if (filter.dtype() == DType::kBFloat16) {
    FlipFilter(static_cast<const uint16_t*>(filter.raw_data()), reinterpret_cast<uint16_t*>(flipped.data()), g, cout);
  } else {
    FlipFilter(static_cast<const uint32_t*>(filter.raw_data()), flipped.data(), g, cout);
  }
  t.filter = flipped.data();
  t.applies = true;
  return t;
}

}  // namespace lockstep
