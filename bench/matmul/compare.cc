// bench_matmul_compare: Lockstep's Gemm next to oneDNN, OpenBLAS and Eigen, all timed in this
// one run, because shared machines are noisy and only ratios taken side by side mean anything.
// One table per dtype and thread count; GFLOP/s, the fraction of the machine's measured peak,
// the ratios the targets are stated in; then which targets pass.
//
//   bench_matmul_compare [--threads=1,2] [--dtypes=bf16,f32] [--shapes=all|plain|mlp|pointwise|NAME,...]
//                        [--min_time=0.2] [--warmup=0.15] [--batches=5] [--rounds=3] [--peak_time=0.6]
//
// bench/matmul/run_matmul_bench.sh builds and runs it; README.md there says how it measures.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <thread>

#include "bench/matmul/measure.h"
#include "bench/matmul/peak.h"
#include "bench/matmul/peers.h"
#include "bench/serving/flags.h"
#include "runtime/bfloat16.h"

namespace lockstep::bench {
namespace {

enum Lib { kLockstep, kOneDnn, kOpenBlas, kEigen, kNumLibs };
constexpr const char* kLibNames[kNumLibs] = {"lockstep", "onednn", "openblas", "eigen"};

struct Options {
  std::vector<int> threads;
  std::vector<bool> bf16;  // one entry per dtype, in table order
  std::vector<MatmulShape> shapes;
  MeasureOptions measure;
  int rounds = 3;
  double peak_s = 0.6;
};

struct Row {
  bool bf16 = false;
  int threads = 1;
  const MatmulShape* shape = nullptr;
  std::array<std::optional<double>, kNumLibs> gflops;
  std::array<bool, kNumLibs> noisy{};
  std::array<double, kNumLibs> cpu_per_wall{};
  std::string onednn_impl;

  std::optional<double> Ratio(Lib peer) const {
    if (!gflops[kLockstep] || !gflops[peer]) return std::nullopt;
    return *gflops[kLockstep] / *gflops[peer];
  }
  // Lockstep over the faster of oneDNN and OpenBLAS (whichever ran).
  std::optional<double> RatioToBest() const {
    const std::optional<double> best = std::max(gflops[kOneDnn], gflops[kOpenBlas]);
    if (!gflops[kLockstep] || !best) return std::nullopt;
    return *gflops[kLockstep] / *best;
  }
};

const char* DTypeName(bool bf16) { return bf16 ? "bf16" : "f32"; }

std::optional<Options> ParseOptions(int argc, char** argv) {
  auto flags =
      Flags::Parse(argc, argv, {"threads", "dtypes", "shapes", "min_time", "warmup", "batches", "rounds", "peak_time"});
  if (!flags) return std::nullopt;
  Options o;
  for (const std::string& t : SplitList(flags->Get("threads", "1,2"))) {
    std::optional<int> n = Flags::ParseNumber<int>(t);
    if (!n || *n < 1) {
      std::fprintf(stderr, "--threads: bad count '%s'\n", t.c_str());
      return std::nullopt;
    }
    o.threads.push_back(*n);
  }
  for (const std::string& d : SplitList(flags->Get("dtypes", "bf16,f32"))) {
    if (d != "bf16" && d != "f32" && d != "fp32") {
      std::fprintf(stderr, "--dtypes: '%s' is not bf16 or f32\n", d.c_str());
      return std::nullopt;
    }
    o.bf16.push_back(d == "bf16");
  }
  std::optional<std::vector<MatmulShape>> shapes = SelectShapes(flags->Get("shapes", "all"));
  auto min_time = flags->Number<double>("min_time", o.measure.min_time_s);
  auto warmup = flags->Number<double>("warmup", o.measure.warmup_s);
  auto batches = flags->Number<int>("batches", o.measure.batches);
  auto rounds = flags->Number<int>("rounds", o.rounds);
  auto peak = flags->Number<double>("peak_time", o.peak_s);
  if (!shapes || !min_time || !warmup || !batches || !rounds || !peak) return std::nullopt;
  o.shapes = std::move(*shapes);
  o.measure = {*warmup, *min_time, std::max(*batches, 1)};
  o.rounds = std::max(*rounds, 1);
  o.peak_s = *peak;
  return o;
}

// A and B in the benchmark's dtype (uniform in [-1, 1]), and C; allocated before any library
// sees them, and shared by all of them.
class Operands {
 public:
  Operands(const MatmulShape& s, bool bf16)
      : a_(s.a_elements() * Size(bf16)), b_(s.b_elements() * Size(bf16)), c_(s.c_elements()) {
    std::minstd_rand rng(42);
    Fill(a_.data(), s.a_elements(), bf16, rng);
    Fill(b_.data(), s.b_elements(), bf16, rng);
  }
  MatmulProblem Problem(const MatmulShape& s, bool bf16) { return {s, bf16, a_.data(), b_.data(), c_.data()}; }

 private:
  static int64_t Size(bool bf16) { return bf16 ? sizeof(bfloat16) : sizeof(float); }
  static void Fill(std::byte* out, int64_t count, bool bf16, std::minstd_rand& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t i = 0; i < count; ++i) {
      const float v = dist(rng);
      if (bf16) {
        static_cast<bfloat16*>(static_cast<void*>(out))[i] = FloatToBfloat16(v);
      } else {
        static_cast<float*>(static_cast<void*>(out))[i] = v;
      }
    }
  }
  AlignedArray<std::byte> a_, b_;
  AlignedArray<float> c_;
};

std::string Cell(std::optional<double> gflops, bool noisy, std::optional<double> peak) {
  if (!gflops) return "n/a";
  char text[32];
  if (peak) {
    std::snprintf(text, sizeof text, "%.1f%s (%.0f%%)", *gflops, noisy ? "~" : "", 100 * *gflops / *peak);
  } else {
    std::snprintf(text, sizeof text, "%.1f%s", *gflops, noisy ? "~" : "");
  }
  return text;
}

std::string RatioCell(std::optional<double> ratio) {
  if (!ratio) return "-";
  char text[16];
  std::snprintf(text, sizeof text, "%.2f", *ratio);
  return text;
}

constexpr const char* kRowFormat = "%-15s %5s %5s %5s %-6s %-6s %15s %15s %15s %15s %7s %7s  %s\n";

void PrintRow(const Row& r, std::optional<double> peak) {
  const MatmulShape& s = *r.shape;
  std::array<std::string, kNumLibs> cells;
  for (int lib = 0; lib < kNumLibs; ++lib) cells[lib] = Cell(r.gflops[lib], r.noisy[lib], peak);
  std::printf(kRowFormat, s.name.c_str(), std::to_string(s.m).c_str(), std::to_string(s.k).c_str(),
              std::to_string(s.n).c_str(), std::string(s.OpName()).c_str(), s.b_prepacked ? "packed" : "plain",
              cells[kLockstep].c_str(), cells[kOneDnn].c_str(), cells[kOpenBlas].c_str(), cells[kEigen].c_str(),
              RatioCell(r.Ratio(kOneDnn)).c_str(), RatioCell(r.RatioToBest()).c_str(), r.onednn_impl.c_str());
  std::fflush(stdout);
}

void PrintEnvironment(std::span<const std::unique_ptr<MatmulLibrary>> libs) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = " unknown";
  while (std::getline(cpuinfo, line)) {
    if (line.starts_with("model name")) {
      model = line.substr(line.find(':') + 1);
      break;
    }
  }
  const OtherLoadMeter meter;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::printf("CPU:%s, %u hardware threads; other processes busy: %.0f%% of the CPUs\n",
              model.c_str(), std::thread::hardware_concurrency(), 100 * meter.Fraction());
  for (const std::unique_ptr<MatmulLibrary>& lib : libs) {
    for (const std::string& text : lib->Describe()) {
      std::printf("  %-9s %s\n", std::string(lib->name()).c_str(), text.c_str());
    }
  }
}

// A pass/fail line for a target over `rows`, then the rows that missed it, wrapped;
// `ratio` picks the figure (nullopt: not counted).
template <typename RatioFn>
void Target(const std::string& what, const std::vector<const Row*>& rows, double bound, RatioFn ratio) {
  int passed = 0, counted = 0;
  std::vector<std::string> misses;
  for (const Row* r : rows) {
    const std::optional<double> v = ratio(*r);
    if (!v) continue;
    ++counted;
    if (*v >= bound) {
      ++passed;
    } else {
      char text[96];
      // Three decimals: a ratio printed as 1.85 may still be below 1.85.
      std::snprintf(text, sizeof text, "%s/t%d %.3fx", r->shape->name.c_str(), r->threads, *v);
      misses.emplace_back(text);
    }
  }
  if (counted == 0) return void(std::printf("[ -- ] %s: nothing measured\n", what.c_str()));
  std::printf("[%s] %s: %d of %d%s\n", passed == counted ? "PASS" : "FAIL", what.c_str(), passed, counted,
              misses.empty() ? "" : "; below target:");
  std::string line = "      ";
  for (const std::string& miss : misses) {
    if (line.size() + miss.size() > 110) {
      std::printf("%s\n", line.c_str());
      line = "      ";
    }
    line += " " + miss + ";";
  }
  if (!misses.empty()) std::printf("%s\n", line.c_str());
}

void PrintTargets(const std::vector<Row>& rows) {
  std::printf("\n== Targets ==\n");
  for (bool bf16 : {true, false}) {
    std::vector<const Row*> all, small_m;
    for (const Row& r : rows) {
      if (r.bf16 != bf16) continue;
      all.push_back(&r);
      if (r.shape->m <= 32) small_m.push_back(&r);
    }
    if (all.empty()) continue;
    if (bf16) {
      Target("bf16 lockstep >= 1.00x onednn, every shape and thread count", all, 1.0,
             [](const Row& r) { return r.Ratio(kOneDnn); });
      Target("bf16 lockstep >= 1.10x onednn at M <= 32", small_m, 1.1, [](const Row& r) { return r.Ratio(kOneDnn); });
    } else {
      Target("f32 lockstep >= 1.00x max(onednn, openblas)", all, 1.0, [](const Row& r) { return r.RatioToBest(); });
    }
  }
  // Scaling: shapes with at least 1024^3's work (2.1 GFLOP): 1024^3, 2048^3 and 64x4096x4096.
  for (bool bf16 : {true, false}) {
    std::vector<const Row*> two_thread;
    for (const Row& r : rows) {
      if (r.bf16 == bf16 && r.threads == 2 && r.shape->Flops() >= 2.0 * 1024 * 1024 * 1024) two_thread.push_back(&r);
    }
    const auto scaling = [&rows](const Row& r2, Lib lib) -> std::optional<double> {
      for (const Row& r1 : rows) {
        if (r1.bf16 == r2.bf16 && r1.threads == 1 && r1.shape == r2.shape && r1.gflops[lib] && r2.gflops[lib]) {
          return *r2.gflops[lib] / *r1.gflops[lib];
        }
      }
      return std::nullopt;
    };
    const std::string what = std::string(DTypeName(bf16)) + " lockstep 2 threads >= 1.85x 1 thread, 1024^3 and up";
    Target(what, two_thread, 1.85, [&](const Row& r) { return scaling(r, kLockstep); });
    for (const Row* r : two_thread) {
      std::printf("       %s/%s 2t/1t:", DTypeName(bf16), r->shape->name.c_str());
      for (Lib lib : {kLockstep, kOneDnn, kOpenBlas, kEigen}) {
        if (std::optional<double> v = scaling(*r, lib)) std::printf(" %s %.2fx", kLibNames[lib], *v);
      }
      std::printf("\n");
    }
  }
}

// Every library on one problem: prepared and checked once, then timed `rounds` times, the
// order reversed each round so that no library always runs right after the same one, and the
// rounds spread in time so that a passing disturbance spoils one round, not the figure.
Row MeasureShape(std::span<const std::unique_ptr<MatmulLibrary>> libs, const MatmulProblem& problem, int threads,
                 const Options& options, int& failures) {
  const MatmulShape& shape = problem.shape;
  Row row{problem.bf16, threads, &shape, {}, {}, {}, {}};
  std::array<std::unique_ptr<PreparedMatmul>, kNumLibs> prepared;
  for (int lib = 0; lib < kNumLibs; ++lib) {
    prepared[lib] = libs[lib]->Prepare(problem);
    if (!prepared[lib]) continue;
    // NaN in C first, so a library that writes nothing cannot pass the check.
    std::fill_n(problem.c, shape.c_elements(), NAN);
    prepared[lib]->Run();
    if (const double error = SampledRelativeError(problem); !(error <= 1e-3)) {
      std::fprintf(stderr, "CHECK FAILED: %s %s %s t%d: relative error %g\n", kLibNames[lib], DTypeName(problem.bf16),
                   shape.name.c_str(), threads, error);
      ++failures;
      prepared[lib].reset();
      continue;
    }
    if (lib == kOneDnn) row.onednn_impl = prepared[lib]->Kernel();
  }
  std::array<double, kNumLibs> best_s, worst_median_s{};
  best_s.fill(INFINITY);
  for (int round = 0; round < options.rounds; ++round) {
    for (int i = 0; i < kNumLibs; ++i) {
      const int lib = round % 2 == 0 ? i : kNumLibs - 1 - i;
      if (!prepared[lib]) continue;
      const Timing t = Measure(*prepared[lib], options.measure);
      if (t.best_s < best_s[lib]) {
        best_s[lib] = t.best_s;
        row.cpu_per_wall[lib] = t.cpu_per_wall;
      }
      worst_median_s[lib] = std::max(worst_median_s[lib], t.median_s);
    }
  }
  for (int lib = 0; lib < kNumLibs; ++lib) {
    if (!prepared[lib]) continue;
    row.gflops[lib] = shape.Flops() / best_s[lib] * 1e-9;
    row.noisy[lib] = worst_median_s[lib] > 1.1 * best_s[lib];
  }
  return row;
}

int Run(const Options& options) {
  const OtherLoadMeter run_load;
  std::vector<std::unique_ptr<MatmulLibrary>> libs;
  libs.push_back(MakeLockstepLibrary());
  libs.push_back(MakeOneDnnLibrary());
  libs.push_back(MakeOpenBlasLibrary());
  libs.push_back(MakeEigenLibrary());
  PrintEnvironment(libs);

  std::printf(
      "\nGFLOP/s = 2*M*N*K / (time per call of the fastest batch): %d round(s), each of >= %.2f s warm-up "
      "and >= %.2f s timed in %d batches,\nper library and shape. (x%%) = fraction of the peak in the table's "
      "header (the higher of a measurement before and after\nthe table); '~' = a round's median batch was > 10%% "
      "slower than the fastest (noisy).\n"
      "B packed: pre-packed once outside the timed loop (Lockstep PackedB; oneDNN weights format_tag::any "
      "+ reorder).\nB plain: passed as stored and packed inside every call, by every library. OpenBLAS and "
      "Eigen always pack inside the call.\nls/dnnl = lockstep / onednn; ls/best = lockstep / max(onednn, "
      "openblas).\n",
      options.rounds, options.measure.warmup_s, options.measure.min_time_s, options.measure.batches);

  int failures = 0;
  std::vector<Row> rows;
  for (bool bf16 : options.bf16) {
    for (int threads : options.threads) {
      // The peak is measured before and after the table and the higher one kept: this is a VM
      // on a shared host, and a slow moment during one measurement would inflate every fraction.
      const PeakKind kind = bf16 ? PeakKind::kBf16Dot : PeakKind::kFma;
      std::optional<double> peak = MeasurePeakGflops(kind, threads, options.peak_s);
      std::string thread_check;
      for (const auto& lib : libs) thread_check += " " + lib->SetThreads(threads);
      std::fprintf(stderr, "measuring %s, %d thread(s)...\n", DTypeName(bf16), threads);
      const size_t first = rows.size();
      for (const MatmulShape& shape : options.shapes) {
        Operands operands(shape, bf16);
        rows.push_back(MeasureShape(libs, operands.Problem(shape, bf16), threads, options, failures));
      }
      peak = std::max(peak, MeasurePeakGflops(kind, threads, options.peak_s));

      std::printf("\n== %s, %d thread%s: peak (%s loop) %s GFLOP/s ==\n", DTypeName(bf16), threads,
                  threads == 1 ? "" : "s", PeakKindName(kind), peak ? Cell(peak, false, {}).c_str() : "n/a");
      std::printf("threads:%s\n", thread_check.c_str());
      std::printf(kRowFormat, "shape", "M", "K", "N", "op", "B", "lockstep", "onednn", "openblas", "eigen", "ls/dnnl",
                  "ls/best", "onednn impl");
      for (size_t i = first; i < rows.size(); ++i) PrintRow(rows[i], peak);
      // The threads each library really kept busy, on the table's largest product.
      const Row* largest = nullptr;
      for (size_t i = first; i < rows.size(); ++i) {
        if (largest == nullptr || rows[i].shape->Flops() > largest->shape->Flops()) largest = &rows[i];
      }
      if (largest != nullptr) {
        std::printf("CPU time / wall time on %s:", largest->shape->name.c_str());
        for (int lib = 0; lib < kNumLibs; ++lib) {
          if (largest->gflops[lib]) std::printf(" %s %.2f", kLibNames[lib], largest->cpu_per_wall[lib]);
        }
        std::printf("\n");
      }
    }
  }
  PrintTargets(rows);
  if (const double other = run_load.Fraction(); other >= 0) {
    std::printf("\nOther processes used %.1f%% of the CPUs during this run%s\n", 100 * other,
                other > 0.05 ? ": WARNING, the figures above are disturbed; run again on a quiet machine" : "");
  }
  if (failures > 0) std::printf("\n%d product(s) failed the correctness check (see stderr)\n", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  std::optional<lockstep::bench::Options> options = lockstep::bench::ParseOptions(argc, argv);
  if (!options) return 2;
  return lockstep::bench::Run(*options);
}
