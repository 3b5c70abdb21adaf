#include "runtime/bfloat16.h"

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_* idiom); the warning
// is about the header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cassert>
#include <cstring>

namespace lockstep {
namespace {

void FloatToBfloat16Scalar(const float* in, bfloat16* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBfloat16(in[i]);
}

void Bfloat16ToFloatScalar(const bfloat16* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Bfloat16ToFloat(in[i]);
}

// The same integer arithmetic as FloatToBfloat16, sixteen lanes at a time. We do not use
// vcvtneps2bf16: it treats subnormal inputs as zero, and we promise to keep them.
__attribute__((target("avx512f,avx512bw")))
void FloatToBfloat16Avx512(const float* in, bfloat16* out, size_t n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i u = _mm512_loadu_si512(in + i);
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(bias, lsb));
    __m512i result = _mm512_mask_mov_epi32(rounded, is_nan, _mm512_or_si512(u, quiet));
    __m256i packed = _mm512_cvtepi32_epi16(_mm512_srli_epi32(result, 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  FloatToBfloat16Scalar(in + i, out + i, n - i);
}

__attribute__((target("avx512f,avx512bw")))
void Bfloat16ToFloatAvx512(const bfloat16* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    _mm512_storeu_si512(out + i, w);
  }
  Bfloat16ToFloatScalar(in + i, out + i, n - i);
}

__attribute__((target("avx2")))
void FloatToBfloat16Avx2(const float* in, bfloat16* out, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    // Signed compare is safe: both sides are below 2^31 after masking.
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(bias, lsb));
    __m256i result = _mm256_blendv_epi8(rounded, _mm256_or_si256(u, quiet), is_nan);
    __m256i hi = _mm256_srli_epi32(result, 16);
    // Pack 8 x u32 (each < 65536) to 8 x u16 in order.
    __m128i lo128 = _mm256_castsi256_si128(hi);
    __m128i hi128 = _mm256_extracti128_si256(hi, 1);
    __m128i packed = _mm_packus_epi32(lo128, hi128);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  FloatToBfloat16Scalar(in + i, out + i, n - i);
}

__attribute__((target("avx2")))
void Bfloat16ToFloatAvx2(const bfloat16* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), w);
  }
  Bfloat16ToFloatScalar(in + i, out + i, n - i);
}

using ToBf16Fn = void (*)(const float*, bfloat16*, size_t);
using ToF32Fn = void (*)(const bfloat16*, float*, size_t);

struct Conversions {
  ToBf16Fn to_bf16;
  ToF32Fn to_f32;
};

Conversions Choose() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    return {FloatToBfloat16Avx512, Bfloat16ToFloatAvx512};
  }
  if (__builtin_cpu_supports("avx2")) return {FloatToBfloat16Avx2, Bfloat16ToFloatAvx2};
  return {FloatToBfloat16Scalar, Bfloat16ToFloatScalar};
}

const Conversions& Chosen() {
  static const Conversions chosen = Choose();
  return chosen;
}

}  // namespace

void FloatToBfloat16(std::span<const float> in, std::span<bfloat16> out) {
  assert(out.size() >= in.size());
  Chosen().to_bf16(in.data(), out.data(), in.size());
}

void Bfloat16ToFloat(std::span<const bfloat16> in, std::span<float> out) {
  assert(out.size() >= in.size());
  Chosen().to_f32(in.data(), out.data(), in.size());
}

}  // namespace lockstep
