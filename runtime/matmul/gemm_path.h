// Which instruction set the matmul core runs on. Chosen once, by CPUID, the first time a Gemm
// runs: AVX512_BF16 (vdpbf16ps) > AVX-512F > AVX2 + FMA > portable C++. All four compute the
// same bits (see microkernel.h for the one exception, subnormals under vdpbf16ps), so the
// choice changes speed, never answers.
//
// LOCKSTEP_GEMM_PATH=portable|avx2|avx512|avx512_bf16 in the environment caps the choice (a
// path the CPU lacks falls back to the best one it has, with a warning); tests and benchmarks
// force a path with SetGemmPath.
#pragma once

#include <span>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

enum class GemmPath { kPortable, kAvx2, kAvx512, kAvx512Bf16 };

// "portable", "avx2", "avx512", "avx512_bf16".
std::string_view GemmPathName(GemmPath path);
StatusOr<GemmPath> ParseGemmPath(std::string_view name);

// Whether this CPU (and its operating system) can run `path`.
bool GemmPathSupported(GemmPath path);
// Every path this CPU can run, slowest first.
std::span<const GemmPath> SupportedGemmPaths();

// The path Gemm uses now.
GemmPath ActiveGemmPath();
// Makes every later Gemm use `path`. For tests and benchmarks: call it while no Gemm runs.
// Fails (and changes nothing) when the CPU cannot run `path`.
Status SetGemmPath(GemmPath path);

}  // namespace lockstep
