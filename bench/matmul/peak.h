// The machine's peak arithmetic rate, measured rather than taken from a data sheet: a loop of
// nothing but independent zmm fused multiply-adds (float32) or vdpbf16ps (bfloat16 pairs), on
// `threads` threads at once. Every matmul result is printed as a fraction of it.
#pragma once

#include <optional>

namespace lockstep::bench {

enum class PeakKind {
  kFma,      // vfmadd231ps zmm: 16 lanes x 2 flops
  kBf16Dot,  // vdpbf16ps zmm: 16 lanes x 2 pairs x 2 flops
};

const char* PeakKindName(PeakKind kind);

// GFLOP/s with `threads` threads running the loop concurrently, best of a few runs of about
// `seconds` in all. nullopt when the CPU (or the OS) lacks the instructions.
std::optional<double> MeasurePeakGflops(PeakKind kind, int threads, double seconds);

}  // namespace lockstep::bench
