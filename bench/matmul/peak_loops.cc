#include "bench/matmul/peak_loops.h"

#include <immintrin.h>

namespace lockstep::bench {

// Sixteen independent accumulators: more than latency x throughput on any AVX-512 core (FMA:
// 4 cycles x 2 per cycle on Intel; Zen 4 issues zmm at 1 per cycle), so the loop is bound by
// issue rate alone, and few enough to stay in registers with the two operands.
#define LOCKSTEP_REPEAT16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

float FmaPeakLoop(int64_t iterations) {
  // acc = acc * 0.5 + 1 converges to 2: no overflow, no subnormals, whatever the count.
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps(static_cast<float>(i));
  LOCKSTEP_REPEAT16(DECLARE)
#undef DECLARE
  for (int64_t it = 0; it < iterations; ++it) {
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, half, one);
    LOCKSTEP_REPEAT16(STEP)
#undef STEP
  }
  __m512 sum = _mm512_setzero_ps();
#define ADD(i) sum = _mm512_add_ps(sum, acc##i);
  LOCKSTEP_REPEAT16(ADD)
#undef ADD
  return _mm512_cvtss_f32(sum);  // one lane is enough to keep every chain alive
}

float Bf16DotPeakLoop(int64_t iterations) {
  // Small products (2^-10 each): the accumulators grow slowly and stay far from overflow.
  const __m512 small = _mm512_set1_ps(0.03125f);
  const __m512bh x = _mm512_cvtne2ps_pbh(small, small);
  // Distinct starting values, or the compiler folds the sixteen identical chains into one.
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps(static_cast<float>(i));
  LOCKSTEP_REPEAT16(DECLARE)
#undef DECLARE
  for (int64_t it = 0; it < iterations; ++it) {
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, x, x);
    LOCKSTEP_REPEAT16(STEP)
#undef STEP
  }
  __m512 sum = _mm512_setzero_ps();
#define ADD(i) sum = _mm512_add_ps(sum, acc##i);
  LOCKSTEP_REPEAT16(ADD)
#undef ADD
  return _mm512_cvtss_f32(sum);  // one lane is enough to keep every chain alive
}

#undef LOCKSTEP_REPEAT16

}  // namespace lockstep::bench
