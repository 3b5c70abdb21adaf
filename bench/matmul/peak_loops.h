// The peak loops themselves, in the one file compiled with -mavx512f -mavx512bf16 -mfma.
// Callers check the CPU first (peak.cc); nothing else may live in that file, so that no code
// the compiler vectorises with AVX-512 runs on a CPU without it.
#pragma once

#include <cstdint>

namespace lockstep::bench {

// Floating-point operations one iteration of each loop performs.
inline constexpr double kFmaFlopsPerIteration = 16 * 16 * 2;       // 16 accumulators x zmm FMA
inline constexpr double kBf16FlopsPerIteration = 16 * 16 * 2 * 2;  // 16 accumulators x vdpbf16ps

// Run `iterations` iterations; the return value only keeps the work from being optimised away.
float FmaPeakLoop(int64_t iterations);
float Bf16DotPeakLoop(int64_t iterations);

}  // namespace lockstep::bench
