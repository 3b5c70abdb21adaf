// Session::Run on a Dense MLP against the same MLP written directly in Eigen (the peer):
// the ratio shows what the graph runtime costs over hand-written code.
//
//   build/bench/bench_session --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
#include <random>

#include "runtime/graph_builder.h"
#include "runtime/session.h"

namespace lockstep {
namespace {

struct Mlp {
  std::vector<int64_t> widths;
  std::vector<Tensor> weights, biases;
};

Mlp MakeMlp(std::vector<int64_t> widths) {
  Mlp mlp{std::move(widths), {}, {}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  for (size_t l = 0; l + 1 < mlp.widths.size(); ++l) {
    Tensor w(DType::kFloat32, Shape{mlp.widths[l], mlp.widths[l + 1]});
    Tensor b(DType::kFloat32, Shape{mlp.widths[l + 1]});
    for (float& v : w.mutable_data<float>()) v = dist(rng);
    for (float& v : b.mutable_data<float>()) v = dist(rng);
    mlp.weights.push_back(w);
    mlp.biases.push_back(b);
  }
  return mlp;
}

std::unique_ptr<Session> MlpSession(const Mlp& mlp) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, mlp.widths.front()});
  for (size_t l = 0; l < mlp.weights.size(); ++l) {
    std::string w = g.Const("w" + std::to_string(l), mlp.weights[l]);
    std::string b = g.Const("b" + std::to_string(l), mlp.biases[l]);
    x = g.Op("BiasAdd", {g.Op("MatMul", {x, w}), b});
    if (l + 1 < mlp.weights.size()) x = g.Op("Relu", {x});
  }
  g.AddSignature({"serving_default", "", {{"x", "x", DType::kFloat32, Shape{-1, mlp.widths.front()}}},
                  {{"y", x, DType::kFloat32, Shape{-1, mlp.widths.back()}}}});
  auto session = Session::Create(std::move(g).Build());
  if (!session.ok()) std::abort();
  return std::move(*session);
}

const std::vector<int64_t> kDigits = {64, 128, 10};
const std::vector<int64_t> kWide = {784, 1024, 1024, 10};

void BM_Session(benchmark::State& state, std::vector<int64_t> widths) {
  Mlp mlp = MakeMlp(widths);
  auto session = MlpSession(mlp);
  const int64_t batch = state.range(0);
  std::vector<NamedTensor> inputs = {{"x", Tensor(DType::kFloat32, Shape{batch, widths.front()})}};
  std::vector<NamedTensor> outputs;
  for (auto _ : state) {
    if (!session->Run("serving_default", inputs, &outputs).ok()) state.SkipWithError("run failed");
    benchmark::DoNotOptimize(outputs);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void BM_Eigen(benchmark::State& state, std::vector<int64_t> widths) {
  Mlp mlp = MakeMlp(widths);
  const int64_t batch = state.range(0);
  std::vector<RowMatrix> w;
  std::vector<Eigen::RowVectorXf> b;
  for (size_t l = 0; l < mlp.weights.size(); ++l) {
    w.push_back(Eigen::Map<const RowMatrix>(mlp.weights[l].data<float>().data(), widths[l], widths[l + 1]));
    b.push_back(Eigen::Map<const Eigen::RowVectorXf>(mlp.biases[l].data<float>().data(), widths[l + 1]));
  }
  RowMatrix x = RowMatrix::Zero(batch, widths.front());
  for (auto _ : state) {
    RowMatrix h = x;
    for (size_t l = 0; l < w.size(); ++l) {
      RowMatrix next = (h * w[l]).rowwise() + b[l];
      if (l + 1 < w.size()) next = next.cwiseMax(0.0f);
      h = std::move(next);
    }
    benchmark::DoNotOptimize(h.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

BENCHMARK_CAPTURE(BM_Session, digits_mlp, kDigits)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_Eigen, digits_mlp, kDigits)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_Session, mlp_784_1024_1024_10, kWide)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_Eigen, mlp_784_1024_1024_10, kWide)->Arg(1)->Arg(64);

}  // namespace
}  // namespace lockstep

BENCHMARK_MAIN();
