// Inside the matmul core: the packed layouts, and the micro-kernels that read them. Packing
// (packing.cc) writes these layouts; each instruction set's kernels (kernels_*.cc) read them;
// the driver (gemm.cc) walks the blocks. Nothing outside runtime/matmul includes this file.
//
// Both operands are packed into 32-bit words, one word per row (A) or column (B) per k step:
//  - float32: a step is one k, a word one float.
//  - bfloat16: a step is a pair of k (k, k+1), a word the pair's two bf16 values with k in the
//    low half, exactly what vdpbf16ps multiplies. An odd K is padded with a zero.
// K is cut into blocks of kKcSteps steps (the last block shorter). Within a block:
//  - B: panels of kNr columns, panel after panel, each [steps][kNr] words (zero past N).
//  - A: strips of the kernel table's `mr` rows, each [steps][mr] words (zero past M).
// So a word is a word whatever the dtype: block, panel and strip offsets are the same
// arithmetic for both.
//
// Rounding, identical on every path (tested): each element of C has one float32 accumulator,
// which starts at zero (or continues from the previous K block) and takes one fused
// multiply-add per k, in k order; for bf16, per pair, k+1 first and then k, which is the
// order vdpbf16ps uses (checked on the hardware by the tests). Products of two bf16 values are
// exact in float32, so a fused and an unfused multiply-add agree there. The only difference
// between paths: vdpbf16ps treats subnormal inputs and results as zero, the others do not.
#pragma once

#include <cstdint>

namespace lockstep {
enum class GemmPath;  // gemm_path.h
}

namespace lockstep::gemm_internal {

inline constexpr int64_t kNr = 32;         // columns per B panel
inline constexpr int64_t kKcSteps = 1024;  // steps per K block
inline constexpr int64_t kMaxMr = 12;      // the tallest strip any kernel table uses

struct MicroKernelArgs {
  int64_t steps = 0;             // steps in this K block
  const uint32_t* a = nullptr;   // one packed strip: [steps][mr]
  const uint32_t* b = nullptr;   // the first of the kernel's panels: [steps][kNr]
  int64_t b_panel_stride = 0;    // words from one panel to the next (steps * kNr)
  float* t = nullptr;            // the output tile, rows of ldt floats
  int64_t ldt = 0;
  bool accumulate = false;       // add to t (a later K block) instead of overwriting it
  // Tiles per call: tile g reads the strip at a + g * a_group_stride and its panels from
  // b + g * b_group_stride, and writes t + g * t_group_stride. One call either sweeps a strip
  // across runs of panels to the right (a_group_stride 0) or takes a panel down strip after
  // strip (b_group_stride 0).
  int64_t groups = 1;
  int64_t a_group_stride = 0;  // words
  int64_t b_group_stride = 0;  // words
  int64_t t_group_stride = 0;  // floats
  // For the direct kernels (KernelTable::direct_*): A is not packed but read where it lies, a
  // row-major matrix of words (floats, or bf16 pairs for a bf16 table) whose strip row r, step
  // s is a[r * lda + s]; lda and a_group_stride then count words of A.
  int64_t lda = 0;
};

// Computes rows x (panels * kNr) of t (or rows x kNr / 2, for a half kernel) from one strip
// and `panels` consecutive panels. The row count and the panel count are fixed per function.
using MicroKernelFn = void (*)(const MicroKernelArgs&);

// The kernels of one instruction set for one operand type.
struct KernelTable {
  const char* name = "";
  int mr = 1;  // strip height, at most kMaxMr
  // For a strip of r valid rows (1..mr): `wide[r]` computes `panels[r]` panels at a time (a
  // short strip covers more columns to keep enough accumulators in flight), `one[r]` a single
  // panel (for what is left at the right edge).
  int panels[kMaxMr + 1] = {};
  MicroKernelFn wide[kMaxMr + 1] = {};
  MicroKernelFn one[kMaxMr + 1] = {};
  // One panel, only its first kNr / 2 columns: for a last panel with no more valid columns
  // (an output layer of 10 classes), half the work of `one`.
  MicroKernelFn half[kMaxMr + 1] = {};
  // `one` and `half` reading A in place (MicroKernelArgs::lda: a float32 A for a float32
  // table, a bf16 A of even K for a bf16 one), with the same multiply-adds in the same order:
  // for a product of one or two panels, where packing A cost as much as the products (N = 16:
  // 35 % of the FMA peak packed, 75 % in place). Null where an instruction set has none (then
  // A is packed).
  MicroKernelFn direct_one[kMaxMr + 1] = {};
  MicroKernelFn direct_half[kMaxMr + 1] = {};
};

// Each defined in its own file, compiled for its instruction set. Only call the ones the CPU
// supports (gemm_path.h decides).
extern const KernelTable kPortableF32, kPortableBf16;
extern const KernelTable kAvx2F32, kAvx2Bf16;
extern const KernelTable kAvx512F32, kAvx512Bf16Emulated;
extern const KernelTable kAvx512Bf16Native;

// The tables a path uses (gemm_path.cc).
const KernelTable& F32Kernels(GemmPath path);
const KernelTable& Bf16Kernels(GemmPath path);

}  // namespace lockstep::gemm_internal
