// The matmul core's contract: C = alpha * op(A) * op(B) + beta * C, then a fused epilogue
// (bias add, residual add, activation) applied in the same pass over C. Every Dense layer and
// every Conv2D, forward and backward, training and serving, goes through here. Row-major,
// arbitrary leading dimensions, A and B each float32 or bfloat16, C float32.
//
// How: the BLIS loop nest. op(B) is packed into column panels (once, ahead of time, when the
// caller passes a PackedB), op(A) into row strips per K block (a float32 A of K <= 512 is
// read in place instead, where the instruction set has kernels for it), and a register-blocked
// micro-kernel for the CPU's instruction set (gemm_path.h) computes tiles of C. The work is
// split over rows and columns of C on the pool; a small problem stays on the calling thread.
// Packing buffers are thread-local and only grow, so a warmed-up Gemm allocates nothing.
//
// Compute type: bfloat16 when either operand is bf16 (a PackedB counts as its compute type)
// or the caller asks for it (bf16_compute), float32 otherwise. In a bf16 product a float32 operand is rounded to nearest-even bf16 while
// it is packed; in a float32 product a bf16 operand widens exactly. Accumulation is float32.
//
// Rounding, which the fusion pass and training/serving parity rely on: each element's dot
// product is one float32 accumulator starting from zero, one fused multiply-add per k in k
// order (bf16: per pair, k+1 then k, as vdpbf16ps does), whatever the blocking, the thread
// count, M (so a row of C never depends on the other rows in the batch) or the instruction
// set. Then, one float operation per step: v = alpha * dot (only when alpha != 1);
// v += beta * C (only when beta != 0); v += bias[j]; v += residual; C = act(v). With alpha = 1
// and beta = 0 this is exactly MatMul, then BiasAdd, then Add (a residual connection's), then
// the activation op.
//
// Leading dimensions and dtypes are not checked (the ops check shapes); C must not overlap A,
// B or the epilogue inputs.
#pragma once

#include <cstdint>

#include "runtime/activation.h"
#include "runtime/dtype.h"
#include "runtime/matmul/packed_b.h"
#include "runtime/thread_pool.h"

namespace lockstep {

struct GemmEpilogue {
  const float* bias = nullptr;      // length N, added to every row
  Activation activation = Activation::kNone;
  const float* residual = nullptr;  // [M, N] with leading dimension ldr, added before the activation
  int64_t ldr = 0;
};

struct GemmArgs {
  bool transpose_a = false;  // A is stored [K, M] when true, [M, K] otherwise
  bool transpose_b = false;  // B is stored [N, K] when true, [K, N] otherwise
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const void* a = nullptr;
  DType a_type = DType::kFloat32;
  int64_t lda = 0;
  const void* b = nullptr;
  DType b_type = DType::kFloat32;
  int64_t ldb = 0;
  // When set, op(B) comes from here (its k and n must match) and b, b_type, ldb and
  // transpose_b are not used.
  const PackedB* packed_b = nullptr;
  // With packed_b: op(B) is its columns [packed_b_col0, packed_b_col0 + n), col0 a multiple of
  // 32 (a panel), so that one packing holds several products' B side by side (Winograd's 16).
  int64_t packed_b_col0 = 0;
  // Compute in bf16 even when both operands are float32, each rounded to nearest-even bf16 as
  // it is packed (mixed-precision training's weight gradients). With packed_b, the packed
  // matrix's compute type decides instead.
  bool bf16_compute = false;
  float beta = 0.0f;  // when 0, C is not read (it may hold garbage, even NaN)
  float* c = nullptr;
  int64_t ldc = 0;
  GemmEpilogue epilogue;
};

// `pool` may be null: then it runs on the calling thread. Small problems stay on the calling
// thread regardless.
void Gemm(const GemmArgs& args, ThreadPool* pool);

}  // namespace lockstep
