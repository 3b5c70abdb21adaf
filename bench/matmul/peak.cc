#include "bench/matmul/peak.h"

#include <algorithm>
#include <chrono>
#include <latch>
#include <thread>
#include <vector>

#include "bench/matmul/peak_loops.h"

namespace lockstep::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool Supported(PeakKind kind) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("fma")) return false;
  return kind == PeakKind::kFma || __builtin_cpu_supports("avx512bf16");
}

float RunLoop(PeakKind kind, int64_t iterations) {
  return kind == PeakKind::kFma ? FmaPeakLoop(iterations) : Bf16DotPeakLoop(iterations);
}

double FlopsPerIteration(PeakKind kind) {
  return kind == PeakKind::kFma ? kFmaFlopsPerIteration : kBf16FlopsPerIteration;
}

// Seconds for `threads` threads to each run `iterations`, started together.
double TimeConcurrent(PeakKind kind, int threads, int64_t iterations) {
  std::latch start(threads + 1);
  std::vector<float> sinks(threads);
  std::vector<std::jthread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      sinks[t] = RunLoop(kind, iterations);
    });
  }
  start.arrive_and_wait();
  const Clock::time_point begin = Clock::now();
  workers.clear();  // joins
  const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  // The sums are used, so the loops cannot be dropped; they are never NaN.
  return sinks[0] != sinks[0] ? 0.0 : seconds;
}

}  // namespace

const char* PeakKindName(PeakKind kind) { return kind == PeakKind::kFma ? "zmm FMA" : "vdpbf16ps"; }

std::optional<double> MeasurePeakGflops(PeakKind kind, int threads, double seconds) {
  if (!Supported(kind)) return std::nullopt;
  // Calibrate on one thread, then size each of three runs to a third of the budget.
  int64_t iterations = 1 << 16;
  double calibration = 0;
  while ((calibration = TimeConcurrent(kind, 1, iterations)) < 0.01) iterations *= 4;
  iterations = std::max<int64_t>(1, static_cast<int64_t>(iterations * (seconds / 3) / calibration));
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const double elapsed = TimeConcurrent(kind, threads, iterations);
    best = std::max(best, threads * iterations * FlopsPerIteration(kind) / elapsed * 1e-9);
  }
  return best;
}

}  // namespace lockstep::bench
