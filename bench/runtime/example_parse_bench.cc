// Serialized tf.Examples to dense tensors, as a SavedModel's classify and regress signatures
// parse them: Lockstep's ParseExampleFeature nodes (one per feature, reading the wire bytes in
// place) in a Session, against the peer, protobuf's own parser: each example parsed into a
// reused tensorflow::Example and its features looked up and copied out (what a plain C++
// implementation, and TensorFlow's slow path, does). Both fill the same [N, width] tensors.
//
//   build/bench/bench_example_parse --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "runtime/graph_builder.h"
#include "runtime/session.h"
#include "tensorflow/core/example/example.pb.h"

namespace lockstep {
namespace {

constexpr int kFeatures = 8;  // in each example; the graph reads kRead of them
constexpr int kRead = 4;
constexpr int kWidth = 16;    // floats per feature

std::string Key(int f) { return "feature_" + std::to_string(f); }

Tensor SerializedExamples(int64_t n) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  Tensor t(DType::kString, Shape{n});
  for (std::string& bytes : t.mutable_data<std::string>()) {
    tensorflow::Example e;
    for (int f = 0; f < kFeatures; ++f) {
      auto* list = (*e.mutable_features()->mutable_feature())[Key(f)].mutable_float_list();
      for (int i = 0; i < kWidth; ++i) list->add_value(dist(rng));
    }
    bytes = e.SerializeAsString();
  }
  return t;
}

std::unique_ptr<Session> ParseSession() {
  GraphBuilder g;
  const std::string serialized = g.Input("inputs", DType::kString, Shape{-1});
  const std::string required = g.Const("required", Tensor(DType::kFloat32, Shape{0}));
  std::vector<TensorBinding> outputs;
  for (int f = 0; f < kRead; ++f) {
    const std::string out = g.Op("ParseExampleFeature", {serialized, required},
                                 {{"key", Key(f * 2)}, {"dtype", DType::kFloat32}, {"shape", Shape{kWidth}}},
                                 Key(f * 2));
    outputs.push_back({Key(f * 2), out, DType::kFloat32, Shape{-1, kWidth}});
  }
  g.AddSignature({"serving_default", "", {{"inputs", serialized, DType::kString, Shape{-1}}}, outputs});
  auto session = Session::Create(std::move(g).Build());
  if (!session.ok()) std::abort();
  return std::move(*session);
}

void BM_LockstepParseExampleFeature(benchmark::State& state) {
  auto session = ParseSession();
  const std::vector<NamedTensor> inputs = {{"inputs", SerializedExamples(state.range(0))}};
  std::vector<NamedTensor> outputs;
  for (auto _ : state) {
    if (!session->Run("serving_default", inputs, &outputs).ok()) state.SkipWithError("run failed");
    benchmark::DoNotOptimize(outputs.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_PeerProtobufParse(benchmark::State& state) {
  const Tensor examples = SerializedExamples(state.range(0));
  const int64_t n = state.range(0);
  std::vector<Tensor> outputs;
  for (int f = 0; f < kRead; ++f) outputs.emplace_back(DType::kFloat32, Shape{n, kWidth});
  std::vector<std::string> keys;
  for (int f = 0; f < kRead; ++f) keys.push_back(Key(f * 2));
  tensorflow::Example e;
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) {
      if (!e.ParseFromString(examples.data<std::string>()[static_cast<size_t>(i)])) {
        state.SkipWithError("parse");
        return;
      }
      const auto& features = e.features().feature();
      for (int f = 0; f < kRead; ++f) {
        auto it = features.find(keys[static_cast<size_t>(f)]);
        if (it == features.end() || it->second.float_list().value_size() != kWidth) {
          state.SkipWithError("feature");
          return;
        }
        std::memcpy(outputs[static_cast<size_t>(f)].mutable_data<float>().data() + i * kWidth,
                    it->second.float_list().value().data(), kWidth * sizeof(float));
      }
    }
    benchmark::DoNotOptimize(outputs.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

BENCHMARK(BM_LockstepParseExampleFeature)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(BM_PeerProtobufParse)->Arg(1)->Arg(64)->Arg(1024);

}  // namespace
}  // namespace lockstep

BENCHMARK_MAIN();
