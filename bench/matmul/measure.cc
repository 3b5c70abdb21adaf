#include "bench/matmul/measure.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/bfloat16.h"

namespace lockstep::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point begin) { return std::chrono::duration<double>(Clock::now() - begin).count(); }

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Element(const void* data, bool bf16, int64_t index) {
  if (bf16) return Bfloat16ToFloat(static_cast<const bfloat16*>(data)[index]);
  return static_cast<const float*>(data)[index];
}

// Seconds all CPUs together spent busy since boot; negative when unreadable.
double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return -1;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double WallSeconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

}  // namespace

OtherLoadMeter::OtherLoadMeter() : busy_s_(MachineBusySeconds()), own_s_(ProcessCpuSeconds()), wall_s_(WallSeconds()) {}

double OtherLoadMeter::Fraction() const {
  const double busy = MachineBusySeconds();
  if (busy < 0 || busy_s_ < 0) return -1;
  const double others = (busy - busy_s_) - (ProcessCpuSeconds() - own_s_);
  const double capacity = (WallSeconds() - wall_s_) * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  return std::clamp(others / capacity, 0.0, 1.0);
}

Timing Measure(PreparedMatmul& matmul, const MeasureOptions& options) {
  const Clock::time_point warm_begin = Clock::now();
  for (int calls = 0; calls < 2 || Since(warm_begin) < options.warmup_s; ++calls) matmul.Run();

  Timing timing;
  std::vector<double> per_call;
  const double batch_s = options.min_time_s / std::max(options.batches, 1);
  const double cpu_begin = ProcessCpuSeconds();
  const Clock::time_point wall_begin = Clock::now();
  for (int batch = 0; batch < std::max(options.batches, 1); ++batch) {
    const Clock::time_point begin = Clock::now();
    int64_t calls = 0;
    double elapsed = 0;
    do {
      matmul.Run();
      ++calls;
    } while ((elapsed = Since(begin)) < batch_s);
    per_call.push_back(elapsed / static_cast<double>(calls));
    timing.calls += calls;
  }
  timing.cpu_per_wall = (ProcessCpuSeconds() - cpu_begin) / Since(wall_begin);
  std::sort(per_call.begin(), per_call.end());
  timing.best_s = per_call.front();
  timing.median_s = per_call[per_call.size() / 2];
  return timing;
}

double SampledRelativeError(const MatmulProblem& p) {
  const MatmulShape& s = p.shape;
  double worst = 0;
  constexpr int kSamples = 8;  // an 8 x 8 grid of C, corners included
  for (int si = 0; si < kSamples; ++si) {
    const int64_t i = (s.m - 1) * si / (kSamples - 1);
    for (int sj = 0; sj < kSamples; ++sj) {
      const int64_t j = (s.n - 1) * sj / (kSamples - 1);
      double dot = 0, magnitude = 0;
      for (int64_t k = 0; k < s.k; ++k) {
        const double a = Element(p.a, p.bf16, s.transpose_a ? k * s.lda() + i : i * s.lda() + k);
        const double b = Element(p.b, p.bf16, s.transpose_b ? j * s.ldb() + k : k * s.ldb() + j);
        dot += a * b;
        magnitude += std::fabs(a * b);
      }
      const double error = std::fabs(p.c[i * s.ldc() + j] - dot) / std::max(magnitude, 1e-30);
      worst = std::max(worst, std::isnan(error) ? INFINITY : error);  // NaN: C never written
    }
  }
  return worst;
}

}  // namespace lockstep::bench
