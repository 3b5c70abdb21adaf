// DepthwiseConv2D, the op a MobileNet-style SavedModel's DepthwiseConv2dNative becomes, on
// MobileNet v1's and EfficientNet-B0's depthwise layers (a serving request, and batch 8): Lockstep's op in a Session
// against oneDNN's grouped convolution (groups = channels, what TensorFlow's oneDNN build and
// PyTorch run), measured in the same run at the same thread count. Both read and write NHWC
// float32, as the tensors a server holds are; oneDNN's weights are reordered once, outside
// the timed loop, into the layout its implementation picks. The implementation oneDNN chose is
// in its rows' labels.
//
//   build/bench/bench_depthwise_conv --benchmark_min_time=0.3
//
// oneDNN is a bench-only peer (libdnnl-dev; bench/matmul/run_matmul_bench.sh installs it).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <dnnl.hpp>
#include <random>

#include "runtime/graph_builder.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"

namespace lockstep {
namespace {

struct Layer {
  int64_t size, channels, stride, kernel, batch = 1;
};

// MobileNet v1 (224x224 input), one layer per resolution, 3x3; then EfficientNet-B0's, 3x3 and
// 5x5 (their channel counts are no powers of two); then EfficientNet-B0's three largest at batch
// 8, whose 13-38 MB inputs come from memory. Every one SAME, M = 1.
constexpr Layer kLayers[] = {{112, 32, 1, 3},    {112, 64, 2, 3},    {56, 128, 1, 3},   {28, 256, 1, 3},
                             {14, 512, 1, 3},    {7, 1024, 1, 3},    {112, 96, 2, 3},   {56, 144, 1, 3},
                             {56, 144, 2, 5},    {28, 240, 1, 5},    {14, 480, 1, 3},   {14, 672, 1, 5},
                             {7, 1152, 1, 5},    {112, 96, 2, 3, 8}, {56, 144, 1, 3, 8}, {112, 32, 1, 3, 8}};

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

int64_t OutSize(const Layer& l) { return (l.size + l.stride - 1) / l.stride; }

// The layer and thread count, and `peer_note` after them, as the row's label.
void Label(benchmark::State& state, const Layer& l, int threads, const std::string& peer_note = "") {
  state.SetLabel("b" + std::to_string(l.batch) + " " + std::to_string(l.size) + "x" + std::to_string(l.size) + "x" + std::to_string(l.channels) + " k" +
                 std::to_string(l.kernel) + " s" + std::to_string(l.stride) + " t" + std::to_string(threads) + peer_note);
  const double macs = static_cast<double>(l.batch * OutSize(l) * OutSize(l) * l.channels * l.kernel * l.kernel);
  state.counters["GMAC/s"] = benchmark::Counter(macs * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LockstepDepthwise(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const int threads = static_cast<int>(state.range(1));
  ThreadPool pool(threads);
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{l.batch, l.size, l.size, l.channels});
  const std::string f =
      g.Const("filter", Tensor::FromVector<float>({l.kernel, l.kernel, l.channels, 1},
                                                  Random(l.kernel * l.kernel * l.channels, 2)));
  const std::string y = g.Op("DepthwiseConv2D", {x, f},
                             {{"strides", std::vector<int64_t>{l.stride, l.stride}}, {"padding", std::string("SAME")}});
  const Shape out{l.batch, OutSize(l), OutSize(l), l.channels};
  g.AddSignature({"serving_default", "", {{"x", x, DType::kFloat32, Shape{l.batch, l.size, l.size, l.channels}}},
                  {{"y", y, DType::kFloat32, out}}});
  SessionOptions options;
  options.pool = &pool;
  auto session = Session::Create(std::move(g).Build(), options);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  const std::vector<NamedTensor> inputs = {
      {"x", Tensor::FromVector<float>({l.batch, l.size, l.size, l.channels},
                                      Random(l.batch * l.size * l.size * l.channels, 1))}};
  std::vector<NamedTensor> outputs;
  for (auto _ : state) {
    if (!(*session)->Run("serving_default", inputs, &outputs).ok()) state.SkipWithError("run failed");
    benchmark::DoNotOptimize(outputs.data());
  }
  Label(state, l, threads);
}

void BM_PeerOneDnnDepthwise(benchmark::State& state) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const Layer& l = kLayers[state.range(0)];
  const int threads = static_cast<int>(state.range(1));
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t c = l.channels, o = OutSize(l);
  const int64_t k = l.kernel;
  const int64_t pad_total = std::max<int64_t>((o - 1) * l.stride + k - l.size, 0);
  const memory::desc src_md({l.batch, c, l.size, l.size}, memory::data_type::f32, tag::nhwc);
  const memory::desc dst_md({l.batch, c, o, o}, memory::data_type::f32, tag::nhwc);
  // Grouped weights [groups, out per group, in per group, kh, kw]; TensorFlow's [kh, kw, c, 1]
  // is that in the order (kh, kw, g): "hwigo" with i = o = 1.
  const memory::desc user_weights_md({c, 1, 1, k, k}, memory::data_type::f32, tag::hwigo);
  const memory::desc any_weights_md({c, 1, 1, k, k}, memory::data_type::f32, tag::any);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      src_md, any_weights_md, dst_md, {l.stride, l.stride},
                                      {pad_total / 2, pad_total / 2}, {pad_total - pad_total / 2, pad_total - pad_total / 2}),
      engine);
  std::vector<float> src = Random(l.batch * l.size * l.size * c, 1), weights = Random(k * k * c, 2),
                     dst(static_cast<size_t>(l.batch * o * o * c));
  memory src_mem(src_md, engine, src.data()), dst_mem(dst_md, engine, dst.data());
  memory user_weights(user_weights_md, engine, weights.data());
  memory weights_mem(pd.weights_desc(), engine);
  dnnl::reorder(user_weights, weights_mem).execute(stream, user_weights, weights_mem);
  stream.wait();
  dnnl::convolution_forward conv(pd);
  for (auto _ : state) {
    conv.execute(stream, {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weights_mem}, {DNNL_ARG_DST, dst_mem}});
    stream.wait();
    benchmark::DoNotOptimize(dst.data());
  }
  Label(state, l, threads, std::string(" ") + pd.impl_info_str());
}

}  // namespace
}  // namespace lockstep

// Each layer's two rows run one after the other, so that drifting load on a shared machine
// hits both alike.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int threads : {1, 2}) {
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(lockstep::kLayers)); ++i) {
      benchmark::RegisterBenchmark("BM_LockstepDepthwise", lockstep::BM_LockstepDepthwise)
          ->Args({i, threads})
          ->UseRealTime();
      benchmark::RegisterBenchmark("BM_PeerOneDnnDepthwise", lockstep::BM_PeerOneDnnDepthwise)
          ->Args({i, threads})
          ->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
