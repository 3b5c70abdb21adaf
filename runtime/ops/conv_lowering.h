// How conv_ops.cc lowers a convolution onto the Gemm core: the im2col matrix (row r: output
// pixel r's receptive field in filter order (kh, kw, cin), zeros over the padding) and its
// inverse scatter, the blocks the backward ops cut it into, an image rounded once to bf16 for
// bf16 products, and a stride-1 input gradient as a convolution of dy. Internal to
// runtime/ops/.
#pragma once

#include <cstdint>

#include "runtime/ops/window.h"
#include "runtime/tensor.h"

namespace lockstep {

// Budget of one im2col block, in floats: it and the Gemm's packed copy of it stay near L2.
inline constexpr int64_t kIm2colFloats = 128 * 1024;
inline constexpr int64_t kMinBlockRows = 32;

// Rows [row0, row0 + rows) of the im2col matrix of `in` (g's input), of float32 or bf16 (as
// its bits) elements.
void Im2Col(const Geometry& g, const float* in, int64_t row0, int64_t rows, float* dst);
void Im2Col(const Geometry& g, const uint16_t* in, int64_t row0, int64_t rows, uint16_t* dst);

// A bf16 product rounds its operands to bf16 as the matmul core packs them; a convolution's
// input, copied KH x KW times by im2col, is rounded once instead, here (to nearest even, as
// packing rounds), and im2col then copies half the bytes into an A that the core reads in
// place (gemm.h's direct A): the same bits. The copy lives in this thread's buffer `slot` (0
// or 1: the filter's gradient rounds x and dy) until the next call for that slot.
const uint16_t* RoundedToBf16(const float* x, int64_t count, int slot);

// This thread's im2col block of `elements` bf16s (the float scratch of op_util.h's
// ThreadScratch).
uint16_t* Bf16Scratch(int64_t elements);

// The inverse scatter: adds rows [row0, row0 + rows) of a [rows, kdim] matrix into the input
// positions they were gathered from (what hangs over the padding is dropped). Rows in order,
// so each element of dx sums its contributions in one fixed order.
void Col2ImAdd(const Geometry& g, const float* col, int64_t row0, int64_t rows, float* dx);

// How the backward ops cut the im2col rows: into blocks of whole images, so that a block's
// col2im writes only its own images.
struct Blocks {
  int64_t images_per_block = 1;
  int64_t count = 0;
  int64_t rows(const Geometry& g) const { return images_per_block * g.pixels_per_image(); }
};

// `spread`: may the blocks be made smaller so that several threads get one each. Only for
// ops whose result does not depend on where the blocks fall.
Blocks ImageBlocks(const Geometry& g, int64_t threads, bool spread);

// At stride 1 a convolution's input gradient is itself a convolution: of dy, with the filter
// turned half a turn and its channel axes swapped (F'[i][j][co][ci] = F[KH-1-i][KW-1-j][ci][co]),
// padded by the window's extent less the forward padding, giving dx's height and width. That
// runs as a forward product (im2col over dy, or Winograd), with K = KH * KW * Cout, and writes
// dx once, where dy · Fᵀ had K = Cout and a col2im adding KH * KW times into dx (on the
// Fashion-MNIST ResNet that scatter alone was 7 % of a training step). Each element of dx is
// then one accumulator over (tap, output channel): a different order from col2im's, the same
// whatever the threads or the batch.
struct StridedOneTranspose {
  bool applies = false;
  Geometry g;                    // the convolution of dy that gives dx
  const void* filter = nullptr;  // F', in the filter's dtype (this thread's scratch)
};

// The convolution whose output is the input gradient of `g`'s stride-1 convolution with
// `filter` (float32 or bf16); not `applies` when a forward pad reaches past the window's
// extent (then col2im). The flipped filter lives in this thread's buffer until the next call.
StridedOneTranspose TransposedConvolution(const Geometry& g, const Tensor& filter);

}  // namespace lockstep
