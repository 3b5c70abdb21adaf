// The matmul core's contract: C = alpha * op(A) * op(B) + beta * C, then a fused epilogue
// (bias add, activation, residual add) applied in the same pass over C. Every Dense layer and
// every Conv2D goes through here. Row-major, arbitrary leading dimensions.
//
// This is the portable float32 implementation (cache-blocked, vectorisable inner loop,
// threaded over rows of C). The bf16 packed kernels with CPUID dispatch replace its insides
// without changing this interface.
//
// Rounding order, which the fusion pass relies on: each element's dot product is summed in
// float32 in k order starting from zero, whatever the blocking, the thread count or M (so a
// row of C does not depend on the other rows in the batch); then, one float operation per
// step, v = alpha * dot; v += beta * C (only when beta != 0); v += bias[j]; v = act(v);
// C = v + residual. With alpha = 1 and beta = 0 this is exactly MatMul, then BiasAdd, then the
// activation op. Leading dimensions are not checked; C must not overlap A, B or the epilogue
// inputs.
#pragma once

#include <cstdint>

#include "runtime/activation.h"
#include "runtime/thread_pool.h"

namespace lockstep {

struct GemmEpilogue {
  const float* bias = nullptr;      // length N, added to every row
  Activation activation = Activation::kNone;
  const float* residual = nullptr;  // [M, N] with leading dimension ldr, added last
  int64_t ldr = 0;
};

struct GemmArgs {
  bool transpose_a = false;  // A is stored [K, M] when true, [M, K] otherwise
  bool transpose_b = false;  // B is stored [N, K] when true, [K, N] otherwise
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;  // when 0, C is not read (it may hold garbage, even NaN)
  float* c = nullptr;
  int64_t ldc = 0;
  GemmEpilogue epilogue;
};

// `pool` may be null: then it runs on the calling thread. Small problems stay on the calling
// thread regardless.
void Gemm(const GemmArgs& args, ThreadPool* pool);

}  // namespace lockstep
