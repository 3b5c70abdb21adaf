// A 3x3 convolution at stride 1 by Winograd's minimal filtering F(2x2, 3x3): each 2x2
// block of output pixels from a 4x4 block of input, with 16 products per channel pair where
// the direct form takes 36, so 2.25 times fewer multiply-adds. Internal to runtime/ops/
// (conv_ops.cc calls it for ResNet-style 3x3 layers).
//
// With d the 4x4 input tile of one channel, g that channel pair's 3x3 filter and
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1]:
// U = G g G^T (the filter, transformed once when the session packs it), V = B^T d B, and the
// 2x2 output is A^T [sum over input channels of U (.) V] A. The sum over input channels is 16
// matrix products V_t [tiles, Cin] x U_t [Cin, Cout] on the Gemm core, one per element t of the
// 4x4 tile, all 16 U_t packed side by side in one PackedB ([Cin, 16 x Cout rounded up to 32]).
//
// Not the bits of the im2col path (the products are taken of transformed values), but the same
// bits whatever the thread count or batch size: every tile is transformed and summed the same
// way wherever it falls. Its error is within a few units of the direct form's (the transforms
// add at most four terms, and G's halves are exact); tested against float64.
#pragma once

#include <cstdint>

#include "runtime/matmul/gemm.h"
#include "runtime/matmul/packed_b.h"
#include "runtime/ops/window.h"
#include "runtime/thread_pool.h"

namespace lockstep {

// Whether a convolution with this filter ([KH, KW, Cin, Cout]), strides and dilations
// runs as Winograd F(2x2, 3x3): 3x3, stride 1, no dilation, 32 or more input and output
// channels, and at most 512 x 512 of them (the widest measured: ResNet-50's last stage, 7 x 7
// pixels, where the transformed filter's 16 / 9 more bytes weigh most, still gained 17 %).
bool WinogradApplies(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t cin,
                     int64_t cout);

// The columns a packed transformed filter has: 16 x Cout rounded up to a panel.
int64_t WinogradPackedColumns(int64_t cout);

// Transforms filter [3, 3, Cin, Cout] (float32 or bfloat16, `filter_type`) to U in float32 and
// packs it for the Gemm into `into` (in place when the size allows), for products in `compute`:
// kFloat32, or kBFloat16 (a layer of attr bf16_winograd, which the server's opt-in bf16 sets;
// conv_ops.cc): then the filter is first rounded to bf16 as the direct form rounds it, so that
// a bf16 filter and a float32 one give the same U, and U and the transformed input are rounded
// to bf16 for the products.
void PackWinogradFilter(const void* filter, DType filter_type, int64_t cin, int64_t cout, DType compute,
                        PackedB& into, ThreadPool* pool);

// out [N, OH, OW, Cout] = the convolution of `in` (NHWC, g's) with the filter `packed` by
// PackWinogradFilter, then `epilogue` (bias, residual of out's shape with ldr = Cout,
// activation) in the Gemm's order.
void WinogradConv(const Geometry& g, int64_t cout, const float* in, const PackedB& packed,
                  const GemmEpilogue& epilogue, float* out, ThreadPool& pool);

}  // namespace lockstep
