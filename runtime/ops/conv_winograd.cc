#include "runtime/ops/conv_winograd.h"

#include <algorithm>

#include "runtime/activation.h"
#include "runtime/bfloat16.h"
#include "runtime/matmul/gemm_path.h"
#include "runtime/ops/op_util.h"

namespace lockstep {
namespace {

constexpr int64_t kPanel = 32;  // the Gemm's panel width (microkernel.h's kNr)
constexpr int kTiles = 16;      // elements of a 4x4 tile: one product each
// Floats of the transformed input of one block of tiles (16 x tiles x Cin): it and the
// products' 16 x tiles x Cout stay near L2.
constexpr int64_t kBlockFloats = 256 * 1024;

int64_t PaddedCout(int64_t cout) { return (cout + kPanel - 1) / kPanel * kPanel; }

// What one call transforms: tile rows [row0, row0 + rows) of the flattened (image, tile row).
struct Block {
  const Geometry* g;
  int64_t cout;
  int64_t tiles_per_row;  // ceil(OW / 2)
  const float* in;
  const float* zeros;  // Cin zeros, read for taps over the padding
  float* v;            // [16][tiles][Cin]
  float* m;            // [16][tiles][Cout]
  float* sink;         // Cout floats, written for tile pixels past the output's edge
  float* out;
  int64_t row0, rows;
};

// V = B^T d B for every tile of the block and channel: 16 streams, each [tiles][Cin].
[[gnu::always_inline]] inline void InputTransform(const Block& b) {
  const Geometry& g = *b.g;
  const int64_t tiles = b.rows * b.tiles_per_row, cin = g.c;
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t n = (b.row0 + r) / ((g.wh.out + 1) / 2), ty = (b.row0 + r) % ((g.wh.out + 1) / 2);
    for (int64_t tx = 0; tx < b.tiles_per_row; ++tx) {
      const int64_t tile = r * b.tiles_per_row + tx;
      const float* d[4][4];
      for (int i = 0; i < 4; ++i) {
        const int64_t ih = 2 * ty - g.wh.pad_before + i;
        for (int j = 0; j < 4; ++j) {
          const int64_t iw = 2 * tx - g.ww.pad_before + j;
          d[i][j] = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w ? b.in + ((n * g.h + ih) * g.w + iw) * cin : b.zeros;
        }
      }
      float* v = b.v + tile * cin;
      const int64_t stream = tiles * cin;
      for (int64_t c = 0; c < cin; ++c) {
        // B^T d: rows.
        float t[4][4];
        for (int j = 0; j < 4; ++j) {
          t[0][j] = d[0][j][c] - d[2][j][c];
          t[1][j] = d[1][j][c] + d[2][j][c];
          t[2][j] = d[2][j][c] - d[1][j][c];
          t[3][j] = d[1][j][c] - d[3][j][c];
        }
        // (B^T d) B: columns.
        for (int i = 0; i < 4; ++i) {
          v[(i * 4 + 0) * stream + c] = t[i][0] - t[i][2];
          v[(i * 4 + 1) * stream + c] = t[i][1] + t[i][2];
          v[(i * 4 + 2) * stream + c] = t[i][2] - t[i][1];
          v[(i * 4 + 3) * stream + c] = t[i][1] - t[i][3];
        }
      }
    }
  }
}

// Y = A^T M A for every tile, written to the output pixels inside it, plus bias and residual
// (the activation follows over the block's output rows).
[[gnu::always_inline]] inline void OutputTransform(const Block& b, const GemmEpilogue& e) {
  const Geometry& g = *b.g;
  const int64_t tiles = b.rows * b.tiles_per_row, cout = b.cout;
  const int64_t stream = tiles * cout;
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t n = (b.row0 + r) / ((g.wh.out + 1) / 2), ty = (b.row0 + r) % ((g.wh.out + 1) / 2);
    for (int64_t tx = 0; tx < b.tiles_per_row; ++tx) {
      const float* m = b.m + (r * b.tiles_per_row + tx) * cout;
      float* y[2][2];
      const float* res[2][2] = {};
      for (int a = 0; a < 2; ++a) {
        for (int c = 0; c < 2; ++c) {
          const int64_t oh = 2 * ty + a, ow = 2 * tx + c;
          const int64_t pixel = (n * g.wh.out + std::min(oh, g.wh.out - 1)) * g.ww.out + std::min(ow, g.ww.out - 1);
          y[a][c] = oh < g.wh.out && ow < g.ww.out ? b.out + pixel * cout : b.sink;
          if (e.residual != nullptr) res[a][c] = e.residual + pixel * e.ldr;
        }
      }
      for (int64_t k = 0; k < cout; ++k) {
        // A^T M: rows.
        float s[2][4];
        for (int j = 0; j < 4; ++j) {
          const float m0 = m[(0 + j) * stream + k], m1 = m[(4 + j) * stream + k];
          const float m2 = m[(8 + j) * stream + k], m3 = m[(12 + j) * stream + k];
          s[0][j] = m0 + m1 + m2;
          s[1][j] = m1 - m2 - m3;
        }
        float o[2][2];
        for (int a = 0; a < 2; ++a) {
          o[a][0] = s[a][0] + s[a][1] + s[a][2];
          o[a][1] = s[a][1] - s[a][2] - s[a][3];
        }
        for (int a = 0; a < 2; ++a) {
          for (int c = 0; c < 2; ++c) {
            float v = o[a][c];
            if (e.bias != nullptr) v += e.bias[k];
            if (e.residual != nullptr) v += res[a][c][k];
            y[a][c][k] = v;
          }
        }
      }
    }
  }
}

struct Transforms {
  void (*input)(const Block&);
  void (*output)(const Block&, const GemmEpilogue&);
};

void InputBaseline(const Block& b) { InputTransform(b); }
void OutputBaseline(const Block& b, const GemmEpilogue& e) { OutputTransform(b, e); }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void InputAvx2(const Block& b) { InputTransform(b); }
__attribute__((target("avx2"))) void OutputAvx2(const Block& b, const GemmEpilogue& e) { OutputTransform(b, e); }
__attribute__((target("avx512f"))) void InputAvx512(const Block& b) { InputTransform(b); }
__attribute__((target("avx512f"))) void OutputAvx512(const Block& b, const GemmEpilogue& e) {
  OutputTransform(b, e);
}
#endif

// The transforms compiled for the matmul core's path: adds and subtracts only, the same bits on
// every one.
Transforms ChooseTransforms() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (ActiveGemmPath()) {
    case GemmPath::kAvx512:
    case GemmPath::kAvx512Bf16: return {InputAvx512, OutputAvx512};
    case GemmPath::kAvx2: return {InputAvx2, OutputAvx2};
    case GemmPath::kPortable: break;
  }
#endif
  return {InputBaseline, OutputBaseline};
}

}  // namespace

bool WinogradApplies(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t cin,
                     int64_t cout) {
  return kh == 3 && kw == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && cin >= 32 && cout >= 32 &&
         cin * cout <= 512 * 512;
}

int64_t WinogradPackedColumns(int64_t cout) { return kTiles * PaddedCout(cout); }

void PackWinogradFilter(const void* filter, DType filter_type, int64_t cin, int64_t cout, DType compute,
                        PackedB& into, ThreadPool* pool) {
  const int64_t cols = WinogradPackedColumns(cout), padded = PaddedCout(cout);
  // The transformed filter before packing: this thread's scratch, not an allocation, since a
  // trainer feeding the filter packs it every step.
  float* u = ThreadScratch(cin * cols);
  std::fill(u, u + cin * cols, 0.0f);
  for (int64_t ci = 0; ci < cin; ++ci) {
    for (int64_t co = 0; co < cout; ++co) {
      float g[3][3];
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
          const int64_t at = ((i * 3 + j) * cin + ci) * cout + co;
          float v = filter_type == DType::kBFloat16 ? Bfloat16ToFloat(static_cast<const bfloat16*>(filter)[at])
                                                    : static_cast<const float*>(filter)[at];
          if (compute == DType::kBFloat16) v = Bfloat16ToFloat(FloatToBfloat16(v));
          g[i][j] = v;
        }
      }
      // G g: rows.
      float t[4][3];
      for (int j = 0; j < 3; ++j) {
        t[0][j] = g[0][j];
        t[1][j] = 0.5f * (g[0][j] + g[1][j] + g[2][j]);
        t[2][j] = 0.5f * (g[0][j] - g[1][j] + g[2][j]);
        t[3][j] = g[2][j];
      }
      // (G g) G^T: columns.
      for (int i = 0; i < 4; ++i) {
        const float w[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]), 0.5f * (t[i][0] - t[i][1] + t[i][2]),
                            t[i][2]};
        for (int j = 0; j < 4; ++j) u[ci * cols + (i * 4 + j) * padded + co] = w[j];
      }
    }
  }
  into.Repack(u, DType::kFloat32, false, cin, cols, cols, compute, pool);
}

void WinogradConv(const Geometry& g, int64_t cout, const float* in, const PackedB& packed,
                  const GemmEpilogue& epilogue, float* out, ThreadPool& pool) {
  const int64_t tile_rows_per_image = (g.wh.out + 1) / 2, tiles_per_row = (g.ww.out + 1) / 2;
  const int64_t tile_rows = g.n * tile_rows_per_image;
  if (tile_rows == 0 || tiles_per_row == 0) return;
  const int64_t per_row = kTiles * tiles_per_row * std::max(g.c, cout);
  const int64_t block_rows = std::clamp<int64_t>(kBlockFloats / per_row, 1, tile_rows);
  const int64_t blocks = (tile_rows + block_rows - 1) / block_rows;
  const Transforms transforms = ChooseTransforms();
  const int64_t padded = PaddedCout(cout);

  // One block: its tiles transformed, the 16 products, the output transform and the
  // activation over its output rows. With fewer blocks than threads (a small image), the
  // block's 16 products are shared out among the threads, each product whole on one thread:
  // each thread then streams only its share of the transformed filters, where splitting every
  // product across threads had them all wait 16 times for each other and ran no faster than one
  // thread (ResNet-50's 7x7 layers in bf16).
  auto run = [&](int64_t block, ThreadPool* share_products) {
    const int64_t row0 = block * block_rows, rows = std::min(block_rows, tile_rows - row0);
    const int64_t tiles = rows * tiles_per_row;
    float* scratch = ThreadScratch(kTiles * tiles * (g.c + cout) + g.c + cout);
    float* zeros = scratch + kTiles * tiles * (g.c + cout);
    std::fill(zeros, zeros + g.c, 0.0f);
    const Block b{&g,      cout,    tiles_per_row, in,  zeros, scratch, scratch + kTiles * tiles * g.c,
                  zeros + g.c, out, row0,          rows};
    transforms.input(b);
    auto products = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        GemmArgs args;
        args.m = tiles;
        args.n = cout;
        args.k = g.c;
        args.a = b.v + t * tiles * g.c;
        args.lda = g.c;
        args.packed_b = &packed;
        args.packed_b_col0 = t * padded;
        args.c = b.m + t * tiles * cout;
        args.ldc = cout;
        Gemm(args, nullptr);
      }
    };
    if (share_products != nullptr && share_products->num_threads() > 1) {
      share_products->ParallelFor(kTiles, 1, products);
    } else {
      products(0, kTiles);
    }
    transforms.output(b, epilogue);
    // The block's output rows: [2 * row0, 2 * (row0 + rows)) of the flattened (image, row),
    // cut at each image's last row.
    for (int64_t r = row0; r < row0 + rows; ++r) {
      const int64_t n = r / tile_rows_per_image, oh = 2 * (r % tile_rows_per_image);
      const int64_t out_rows = std::min<int64_t>(2, g.wh.out - oh);
      float* first = out + (n * g.wh.out + oh) * g.ww.out * cout;
      ApplyActivation(epilogue.activation, first, first, out_rows * g.ww.out * cout);
    }
  };
  ForEachBlock(pool, blocks, run);
}

}  // namespace lockstep
