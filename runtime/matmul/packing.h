// Inside the matmul core: copying A and B into the packed layouts of microkernel.h, converting
// on the way (bf16 widened to float32, or float32 rounded to nearest-even bf16, as the compute
// type says).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/matmul/microkernel.h"

namespace lockstep::gemm_internal {

// A row-major matrix as the product sees it: element (r, c) of op(X) is X[r][c], or X[c][r]
// when `transpose`.
struct MatrixView {
  const void* data = nullptr;
  DType type = DType::kFloat32;  // kFloat32 or kBFloat16
  int64_t ld = 0;
  bool transpose = false;
};

// Words per row (A) or column (B) that `k` elements of K take: k for float32, pairs for bf16.
inline int64_t StepsFor(int64_t k, bool bf16) { return bf16 ? (k + 1) / 2 : k; }
// Elements of K per K block.
inline int64_t BlockK(bool bf16) { return bf16 ? 2 * kKcSteps : kKcSteps; }
inline int64_t NumKBlocks(int64_t k, bool bf16) { return (k + BlockK(bf16) - 1) / BlockK(bf16); }
inline int64_t PaddedN(int64_t n) { return (n + kNr - 1) / kNr * kNr; }

// Words of a whole packed B of op(B) = [k, n].
inline size_t PackedBWords(int64_t k, int64_t n, bool bf16) {
  return static_cast<size_t>(StepsFor(k, bf16) * PaddedN(n));
}
// Word offset of K block `kb` in a packed B, and of panel `panel` within it.
inline int64_t PackedBBlockOffset(int64_t kb, int64_t n) { return kb * kKcSteps * PaddedN(n); }

// Packs K block `kb`, panels [panel_begin, panel_end) of op(b) = [k, n] into `dst`, a whole
// packed B (the block and panel offsets are applied here).
void PackBPanels(const MatrixView& b, bool bf16, int64_t k, int64_t n, int64_t kb,
                 int64_t panel_begin, int64_t panel_end, uint32_t* dst);

// Packs rows [i0, i0 + rows) and K elements [k0, k0 + kc) of op(a) as strips of `mr` rows:
// strip s at dst + s * steps * mr, where steps = StepsFor(kc). `k` is op(a)'s full K (bf16
// pads a pair past it with zero). The words of rows past `rows` in the last strip are left
// unwritten: the kernel for a short strip does not read them.
void PackAStrips(const MatrixView& a, bool bf16, int mr, int64_t i0, int64_t rows, int64_t k0,
                 int64_t kc, int64_t k, uint32_t* dst);

}  // namespace lockstep::gemm_internal
