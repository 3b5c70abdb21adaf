// The vector instruction set a hot loop of the trainer runs with: its loops are compiled for
// AVX-512, AVX2 and the baseline, and the CPU's is picked once (as runtime/bfloat16.cc and the
// matmul core do). Not GCC's target_clones: its ifunc resolvers run before ThreadSanitizer's
// runtime has started, and crash TSan builds.
//
// Every variant must give the same bits: the trainer is compiled without contraction into
// fused multiply-adds (training/CMakeLists.txt), so a wider vector changes only how many
// elements one instruction computes, not how each is computed.
#pragma once

namespace lockstep::training {

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

inline VectorIsa DetectVectorIsa() {
  static const VectorIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return VectorIsa::kAvx512;
    if (__builtin_cpu_supports("avx2")) return VectorIsa::kAvx2;
    return VectorIsa::kBaseline;
  }();
  return isa;
}

}  // namespace lockstep::training
