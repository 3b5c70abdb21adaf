#include "runtime/matmul/packing.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>

#include "runtime/bfloat16.h"

#include <emmintrin.h>

namespace lockstep::gemm_internal {
namespace {

// Lines one packing pass handles at once: a B panel's width (A strips are narrower).
constexpr int64_t kMaxLines = kNr;

// Every packing is one of two loops over a line of op(X) (a row of op(A), a column of op(B)):
//  - the line's K elements are contiguous in memory (A stored [M, K], B stored [N, K]): read
//    along the line, write one word every `stride` words (StridedWords);
//  - the lines are contiguous at a fixed k (A stored [K, M], B stored [K, N]): read one or two
//    k-rows across many lines, write consecutive words (ContiguousWords).

template <typename Src>
uint32_t F32Bits(Src x) {
  if constexpr (std::is_same_v<Src, float>) {
    return std::bit_cast<uint32_t>(x);
  } else {
    return static_cast<uint32_t>(x.bits) << 16;
  }
}

template <typename Src>
uint32_t Bf16Bits(Src x) {
  if constexpr (std::is_same_v<Src, float>) {
    return FloatToBfloat16(x).bits;
  } else {
    return x.bits;
  }
}

// kc elements of one line starting at `src` -> StepsFor(kc) consecutive words.
template <typename Src, bool kBf16>
void LineWords(const Src* src, int64_t kc, uint32_t* dst) {
  if constexpr (!kBf16) {
    for (int64_t s = 0; s < kc; ++s) dst[s] = F32Bits(src[s]);
  } else if constexpr (std::is_same_v<Src, float>) {
    // A pair's word is its two bf16s in memory order: the line converted in bulk (vectorised,
    // the scalar rounding's bits; the scalar loop here took 10 % of a bf16 ConvNeXt-T).
    const int64_t pairs = kc / 2;
    FloatToBfloat16(std::span<const float>(src, static_cast<size_t>(2 * pairs)),
                    std::span<bfloat16>(reinterpret_cast<bfloat16*>(dst), static_cast<size_t>(2 * pairs)));
    if (kc % 2 != 0) dst[pairs] = Bf16Bits(src[kc - 1]);
  } else {
    const int64_t pairs = kc / 2;
    for (int64_t s = 0; s < pairs; ++s) dst[s] = Bf16Bits(src[2 * s]) | (Bf16Bits(src[2 * s + 1]) << 16);
    if (kc % 2 != 0) dst[pairs] = Bf16Bits(src[kc - 1]);
  }
}

// Word s of a line that may sit at any byte address (a bf16 row read as pairs is only 2-byte
// aligned).
inline uint32_t WordAt(const char* line, int64_t s) {
  uint32_t w;
  std::memcpy(&w, line + 4 * s, sizeof w);
  return w;
}

// A 4 x 4 block of words: word s0..s0+3 of lines r[0..3] -> rows s0..s0+3 of dst, columns
// l..l+3.
inline void Transpose4x4(const char* const* r, int64_t s0, uint32_t* o, int64_t width) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + 4 * s0));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + 4 * s0));
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + 4 * s0));
  const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + 4 * s0));
  const __m128i ab_lo = _mm_unpacklo_epi32(a, b), ab_hi = _mm_unpackhi_epi32(a, b);
  const __m128i cd_lo = _mm_unpacklo_epi32(c, d), cd_hi = _mm_unpackhi_epi32(c, d);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_unpacklo_epi64(ab_lo, cd_lo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o + width), _mm_unpackhi_epi64(ab_lo, cd_lo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 2 * width), _mm_unpacklo_epi64(ab_hi, cd_hi));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 3 * width), _mm_unpackhi_epi64(ab_hi, cd_hi));
}

// dst[s * width + l] = word s of lines[l], for l < count, s < steps: a transpose, in 4 x 4
// blocks of words through SSE2 (every x86-64 has it), the rest one word at a time. Four rows
// of dst are finished before the next four are begun: going line group by line group instead
// would write each row of a B panel (128 bytes) eight times, 16 bytes at a time, long after
// it left L1 (1.8 cycles a word measured, against 0.5 this way).
void TransposeWords(const char* const* lines, int64_t count, int64_t steps, uint32_t* dst,
                    int64_t width) {
  const int64_t full_lines = count / 4 * 4;
  int64_t s = 0;
  for (; s + 4 <= steps; s += 4) {
    for (int64_t l = 0; l < full_lines; l += 4) Transpose4x4(lines + l, s, dst + s * width + l, width);
    for (int64_t l = full_lines; l < count; ++l) {
      for (int64_t q = s; q < s + 4; ++q) dst[q * width + l] = WordAt(lines[l], q);
    }
  }
  for (; s < steps; ++s) {
    for (int64_t l = 0; l < count; ++l) dst[s * width + l] = WordAt(lines[l], s);
  }
}

// `count` lines at one step: element i of k-row `lo` (and of `hi`, the next k, for bf16; null
// past K) -> dst[i]. Inline SSE2 for the copies without conversion: the counts are often a
// strip's 12, where a library call costs more than the copy.
template <typename Src, bool kBf16>
__attribute__((always_inline)) inline void ContiguousWords(const Src* lo, const Src* hi, int64_t count,
                                                           uint32_t* dst) {
  int64_t i = 0;
  if constexpr (std::is_same_v<Src, float> && !kBf16) {
    for (; i + 4 <= count; i += 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + i)));
    }
  } else if constexpr (std::is_same_v<Src, bfloat16> && kBf16) {
    for (; i + 8 <= count; i += 8) {
      const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + i));
      const __m128i h = hi != nullptr ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + i))
                                      : _mm_setzero_si128();
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_unpacklo_epi16(l, h));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4), _mm_unpackhi_epi16(l, h));
    }
    if (i + 4 <= count) {  // the last third of a 12-row strip
      const __m128i l = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(lo + i));
      const __m128i h = hi != nullptr ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(hi + i))
                                      : _mm_setzero_si128();
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_unpacklo_epi16(l, h));
      i += 4;
    }
  }
  if constexpr (!kBf16) {
    for (; i < count; ++i) dst[i] = F32Bits(lo[i]);
  } else if (hi != nullptr) {
    for (; i < count; ++i) dst[i] = Bf16Bits(lo[i]) | (Bf16Bits(hi[i]) << 16);
  } else {
    for (; i < count; ++i) dst[i] = Bf16Bits(lo[i]);
  }
}

// A k-row's run of `count` elements is a short piece of a long row, one piece per k, so the
// hardware prefetchers do not see them coming: when x is not in L2 (the 4 MB C of the
// previous product pushed it out) every piece waited on L3. Pieces a few k-rows ahead are
// asked for explicitly (float32 dW, 1024 x 256 x 1024: packing A from 9 % of the time to 5 %).
constexpr int64_t kPrefetchRows = 8;

template <typename Src>
inline void PrefetchPiece(const Src* row, int64_t count) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = count * static_cast<int64_t>(sizeof(Src));
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
  __builtin_prefetch(p + bytes - 1);
}

// Lines [line0, line0 + count) of op(x) over K elements [k0, k0 + kc) into `dst`, line l's
// word for step s at dst[s * width + l]. `lines_along_rows`: a line is a row of op(x) (A)
// rather than a column (B).
template <typename Src, bool kBf16>
void PackLines(const MatrixView& x, bool lines_along_rows, int64_t line0, int64_t count, int64_t k0,
               int64_t kc, int64_t k, int64_t width, uint32_t* dst) {
  const Src* base = static_cast<const Src*>(x.data);
  // Element (line, kk) is at base[line * ld + kk] when K runs along memory, else
  // base[kk * ld + line].
  const bool k_contiguous = lines_along_rows != x.transpose;
  if (k_contiguous) {
    // Words straight from memory when they already are words (float32 into float32, whole
    // bf16 pairs into bf16); otherwise converted line by line into an L1-sized buffer first.
    // Either way the transpose then writes whole blocks.
    constexpr bool kSameWords = std::is_same_v<Src, float> != kBf16;
    const int64_t steps = StepsFor(kc, kBf16);
    const char* lines[kMaxLines];
    // Allocated on a thread's first conversion, not in every thread's static TLS block.
    thread_local std::unique_ptr<uint32_t[]> converted_storage;
    if (!converted_storage) converted_storage = std::make_unique<uint32_t[]>(kMaxLines * kKcSteps);
    uint32_t* converted = converted_storage.get();
    for (int64_t l0 = 0; l0 < count; l0 += kMaxLines) {
      const int64_t n = std::min(kMaxLines, count - l0);
      for (int64_t l = 0; l < n; ++l) {
        const Src* line = base + (line0 + l0 + l) * x.ld + k0;
        if (kSameWords && kc % 2 == 0) {
          lines[l] = reinterpret_cast<const char*>(line);
        } else {
          LineWords<Src, kBf16>(line, kc, converted + l * kKcSteps);
          lines[l] = reinterpret_cast<const char*>(converted + l * kKcSteps);
        }
      }
      TransposeWords(lines, n, steps, dst + l0, width);
    }
    return;
  }
  const int64_t steps = StepsFor(kc, kBf16);
  const int64_t step_k = kBf16 ? 2 : 1;
  const int64_t k_end = std::min(k, k0 + kc);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t kk = k0 + s * step_k;
    const Src* lo = base + kk * x.ld + line0;
    const Src* hi = kBf16 && kk + 1 < k ? lo + x.ld : nullptr;
    if (kk + kPrefetchRows < k_end) PrefetchPiece(lo + kPrefetchRows * x.ld, count);
    ContiguousWords<Src, kBf16>(lo, hi, count, dst + s * width);
  }
}

template <typename Src, bool kBf16>
void PackBPanelsT(const MatrixView& b, int64_t k, int64_t n, int64_t kb, int64_t panel_begin,
                  int64_t panel_end, uint32_t* dst) {
  const int64_t k0 = kb * BlockK(kBf16);
  const int64_t kc = std::min(BlockK(kBf16), k - k0);
  const int64_t steps = StepsFor(kc, kBf16);
  uint32_t* block = dst + PackedBBlockOffset(kb, n);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    uint32_t* d = block + panel * steps * kNr;
    const int64_t j0 = panel * kNr;
    const int64_t cols = std::min(kNr, n - j0);
    if (cols < kNr) std::memset(d, 0, static_cast<size_t>(steps * kNr) * sizeof(uint32_t));
    PackLines<Src, kBf16>(b, /*lines_along_rows=*/false, j0, cols, k0, kc, k, kNr, d);
  }
}

template <typename Src, bool kBf16>
void PackAStripsT(const MatrixView& a, int64_t mr, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                  int64_t k, uint32_t* dst) {
  const int64_t steps = StepsFor(kc, kBf16);
  if (a.transpose) {
    // A stored [K, M]: step by step across every strip, so both k-rows are read in order.
    const Src* base = static_cast<const Src*>(a.data);
    const int64_t step_k = kBf16 ? 2 : 1;
    const int64_t strip_words = steps * mr;
    const int64_t k_end = std::min(k, k0 + kc);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t kk = k0 + s * step_k;
      const Src* lo = base + kk * a.ld + i0;
      const Src* hi = kBf16 && kk + 1 < k ? lo + a.ld : nullptr;
      if (kk + kPrefetchRows < k_end) PrefetchPiece(lo + kPrefetchRows * a.ld, rows);
      uint32_t* d = dst + s * mr;
      int64_t s0 = 0;
      if (hi != nullptr) {  // the common case, with no null checks inside
        for (; s0 + mr <= rows; s0 += mr, d += strip_words) {
          ContiguousWords<Src, kBf16>(lo + s0, hi + s0, mr, d);
        }
      }
      for (; s0 < rows; s0 += mr, d += strip_words) {
        ContiguousWords<Src, kBf16>(lo + s0, hi != nullptr ? hi + s0 : nullptr, std::min(mr, rows - s0), d);
      }
    }
    return;
  }
  for (int64_t s0 = 0; s0 < rows; s0 += mr) {
    uint32_t* d = dst + (s0 / mr) * steps * mr;
    // A strip of fewer rows is read by a kernel for that many rows: no padding to write.
    const int64_t valid = std::min(mr, rows - s0);
    PackLines<Src, kBf16>(a, /*lines_along_rows=*/true, i0 + s0, valid, k0, kc, k, mr, d);
  }
}

}  // namespace

void PackBPanels(const MatrixView& b, bool bf16, int64_t k, int64_t n, int64_t kb,
                 int64_t panel_begin, int64_t panel_end, uint32_t* dst) {
  const bool f32_src = b.type == DType::kFloat32;
  if (bf16) {
    f32_src ? PackBPanelsT<float, true>(b, k, n, kb, panel_begin, panel_end, dst)
            : PackBPanelsT<bfloat16, true>(b, k, n, kb, panel_begin, panel_end, dst);
  } else {
    f32_src ? PackBPanelsT<float, false>(b, k, n, kb, panel_begin, panel_end, dst)
            : PackBPanelsT<bfloat16, false>(b, k, n, kb, panel_begin, panel_end, dst);
  }
}

void PackAStrips(const MatrixView& a, bool bf16, int mr, int64_t i0, int64_t rows, int64_t k0,
                 int64_t kc, int64_t k, uint32_t* dst) {
  const bool f32_src = a.type == DType::kFloat32;
  if (bf16) {
    f32_src ? PackAStripsT<float, true>(a, mr, i0, rows, k0, kc, k, dst)
            : PackAStripsT<bfloat16, true>(a, mr, i0, rows, k0, kc, k, dst);
  } else {
    f32_src ? PackAStripsT<float, false>(a, mr, i0, rows, k0, kc, k, dst)
            : PackAStripsT<bfloat16, false>(a, mr, i0, rows, k0, kc, k, dst);
  }
}

}  // namespace lockstep::gemm_internal
