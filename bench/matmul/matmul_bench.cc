// bench_matmul: Lockstep's Gemm alone, on every shape bench_matmul_compare uses, in bf16 and
// float32, with B pre-packed (a PackedB, as a loaded model holds its weights) and plain (Gemm
// packs it per call, as a training step does), on 1 and 2 threads. No peers, so it builds
// wherever the product does; the comparison with oneDNN, OpenBLAS and Eigen is
// bench_matmul_compare's job.
//
//   build/bench/bench_matmul --benchmark_filter='bf16/packed/t1/' --benchmark_min_time=0.3
//
// Names: Gemm/<dtype>/<packed|plain>/t<threads>/<shape>; the GFLOP/s column is FLOP/s (2*M*N*K
// per call) in benchmark's units, so "120G/s" is 120 GFLOP/s. Wall-clock time throughout:
// the pool's workers do the work, so the main thread's CPU time would understate it.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "bench/matmul/shapes.h"
#include "runtime/bfloat16.h"
#include "runtime/matmul/gemm.h"
#include "runtime/matmul/gemm_path.h"
#include "runtime/matmul/packed_b.h"

namespace lockstep::bench {
namespace {

// Uniform in [-1, 1], in the benchmark's dtype.
std::vector<uint16_t> RandomBf16(int64_t count, std::minstd_rand& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> out(count);
  for (uint16_t& v : out) v = FloatToBfloat16(dist(rng)).bits;
  return out;
}

std::vector<float> RandomF32(int64_t count, std::minstd_rand& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> out(count);
  for (float& v : out) v = dist(rng);
  return out;
}

void BM_Gemm(benchmark::State& state, MatmulShape shape, bool bf16, bool packed, int threads) {
  // Everything allocated and packed before the timed loop.
  std::minstd_rand rng(42);
  const std::vector<uint16_t> a16 = bf16 ? RandomBf16(shape.a_elements(), rng) : std::vector<uint16_t>{};
  const std::vector<uint16_t> b16 = bf16 ? RandomBf16(shape.b_elements(), rng) : std::vector<uint16_t>{};
  const std::vector<float> a32 = bf16 ? std::vector<float>{} : RandomF32(shape.a_elements(), rng);
  const std::vector<float> b32 = bf16 ? std::vector<float>{} : RandomF32(shape.b_elements(), rng);
  std::vector<float> c(shape.c_elements());
  ThreadPool pool(threads);

  const DType type = bf16 ? DType::kBFloat16 : DType::kFloat32;
  GemmArgs args;
  args.transpose_a = shape.transpose_a;
  args.transpose_b = shape.transpose_b;
  args.m = shape.m;
  args.n = shape.n;
  args.k = shape.k;
  args.a = bf16 ? static_cast<const void*>(a16.data()) : a32.data();
  args.a_type = type;
  args.lda = shape.lda();
  args.b = bf16 ? static_cast<const void*>(b16.data()) : b32.data();
  args.b_type = type;
  args.ldb = shape.ldb();
  args.c = c.data();
  args.ldc = shape.ldc();
  PackedB packed_b;
  if (packed) {
    packed_b = PackedB::Pack(args.b, type, shape.transpose_b, shape.k, shape.n, shape.ldb(), type, &pool);
    args.packed_b = &packed_b;
  }

  // Gemm's packing buffers are thread-local and grow on first use: grow them untimed.
  Gemm(args, &pool);
  for (auto _ : state) {
    Gemm(args, &pool);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(shape.Flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(GemmPathName(ActiveGemmPath())));
}

void RegisterAll() {
  for (bool bf16 : {true, false}) {
    for (bool packed : {true, false}) {
      for (int threads : {1, 2}) {
        for (const MatmulShape& shape : AllShapes()) {
          const std::string name = std::string("Gemm/") + (bf16 ? "bf16" : "f32") + (packed ? "/packed" : "/plain") +
                                   "/t" + std::to_string(threads) + "/" + shape.name;
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, shape, bf16, packed, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  lockstep::bench::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
