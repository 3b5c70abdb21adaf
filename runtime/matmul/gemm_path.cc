#include "runtime/matmul/gemm_path.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/matmul/microkernel.h"

namespace lockstep {
namespace {

constexpr std::array<GemmPath, 4> kAllPaths = {GemmPath::kPortable, GemmPath::kAvx2,
                                               GemmPath::kAvx512, GemmPath::kAvx512Bf16};

bool CpuHas(GemmPath path) {
  __builtin_cpu_init();
  switch (path) {
    case GemmPath::kPortable: return true;
    case GemmPath::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmPath::kAvx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    case GemmPath::kAvx512Bf16:
      return CpuHas(GemmPath::kAvx512) && __builtin_cpu_supports("avx512bf16");
  }
  return false;
}

const std::vector<GemmPath>& Supported() {
  static const std::vector<GemmPath> paths = [] {
    std::vector<GemmPath> out;
    for (GemmPath p : kAllPaths) {
      if (CpuHas(p)) out.push_back(p);
    }
    return out;
  }();
  return paths;
}

GemmPath Initial() {
  GemmPath best = Supported().back();
  const char* env = std::getenv("LOCKSTEP_GEMM_PATH");
  if (env == nullptr || *env == '\0') return best;
  StatusOr<GemmPath> wanted = ParseGemmPath(env);
  if (!wanted.ok()) {
    spdlog::warn("event=gemm_path_ignored reason=\"{}\"", wanted.status().message());
    return best;
  }
  if (!CpuHas(*wanted)) {
    spdlog::warn("event=gemm_path_ignored path={} reason=\"not supported by this CPU\" using={}",
                 GemmPathName(*wanted), GemmPathName(best));
    return best;
  }
  return *wanted;
}

std::atomic<int>& Active() {
  static std::atomic<int> active{static_cast<int>(Initial())};
  return active;
}

}  // namespace

std::string_view GemmPathName(GemmPath path) {
  switch (path) {
    case GemmPath::kPortable: return "portable";
    case GemmPath::kAvx2: return "avx2";
    case GemmPath::kAvx512: return "avx512";
    case GemmPath::kAvx512Bf16: return "avx512_bf16";
  }
  return "portable";
}

StatusOr<GemmPath> ParseGemmPath(std::string_view name) {
  for (GemmPath p : kAllPaths) {
    if (GemmPathName(p) == name) return p;
  }
  return InvalidArgument("unknown matmul path '" + std::string(name) +
                         "' (expected portable, avx2, avx512 or avx512_bf16)");
}

bool GemmPathSupported(GemmPath path) { return CpuHas(path); }

std::span<const GemmPath> SupportedGemmPaths() { return Supported(); }

GemmPath ActiveGemmPath() { return static_cast<GemmPath>(Active().load(std::memory_order_relaxed)); }

Status SetGemmPath(GemmPath path) {
  if (!CpuHas(path)) {
    return FailedPrecondition("this CPU cannot run the " + std::string(GemmPathName(path)) +
                              " matmul path");
  }
  Active().store(static_cast<int>(path), std::memory_order_relaxed);
  return Status::Ok();
}

namespace gemm_internal {

const KernelTable& F32Kernels(GemmPath path) {
  switch (path) {
    case GemmPath::kPortable: return kPortableF32;
    case GemmPath::kAvx2: return kAvx2F32;
    case GemmPath::kAvx512:
    case GemmPath::kAvx512Bf16: return kAvx512F32;
  }
  return kPortableF32;
}

const KernelTable& Bf16Kernels(GemmPath path) {
  switch (path) {
    case GemmPath::kPortable: return kPortableBf16;
    case GemmPath::kAvx2: return kAvx2Bf16;
    case GemmPath::kAvx512: return kAvx512Bf16Emulated;
    case GemmPath::kAvx512Bf16: return kAvx512Bf16Native;
  }
  return kPortableBf16;
}

}  // namespace gemm_internal
}  // namespace lockstep
