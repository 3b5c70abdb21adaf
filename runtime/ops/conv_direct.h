// A float32 convolution over few input channels (an image network's stem: 3 channels in, 16 to
// 96 out), computed directly rather than through im2col and the Gemm core. Internal to
// runtime/ops/ (conv_ops.cc calls it).
//
// With K = KH * KW * Cin of 27 or 147, the Gemm's packing of the im2col matrix and its epilogue
// weigh as much as the products (EfficientNet-B0's 3x3 stem ran at 17 % of the FMA peak). Here
// each output pixel's Cout sums stay in registers over its whole window and the x values are
// read from the image as they are needed.
//
// The same bits as the im2col path: each output element is the fused multiply-add chain over k
// = (i, j, c) in im2col order, from 0, taps over the padding included as products of 0 (so a
// NaN or infinite filter value makes the same NaN); then the Gemm epilogue's bias, residual and
// activation in its order. Compiled for AVX-512F, AVX2 and baseline x86-64 like the other
// kernels (std::fma is libm's exact fmaf on the last), picked by the matmul core's path.
#pragma once

#include <cstdint>

#include "runtime/matmul/gemm.h"
#include "runtime/ops/window.h"
#include "runtime/thread_pool.h"

namespace lockstep {

// Whether DirectConv takes a float32 convolution with `cin` input and `cout` output channels:
// at most 4 in, a multiple of 16 out. It reads the filter as it is, so the session does not
// pack such a filter for the Gemm (conv_ops.cc's PackFilter).
bool DirectConvApplies(int64_t cin, int64_t cout);

// out [N, OH, OW, Cout] = the convolution of `in` (NHWC, g's) with `filter` [KH, KW, Cin, Cout],
// then `epilogue` (bias [Cout], residual of out's shape with leading dimension ldr = Cout,
// activation). Rows of the output in parallel on `pool`.
void DirectConv(const Geometry& g, int64_t cout, const float* in, const float* filter, const GemmEpilogue& epilogue,
                float* out, ThreadPool& pool);

}  // namespace lockstep
