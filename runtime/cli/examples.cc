#include "runtime/cli/examples.h"

#include "runtime/graph_builder.h"

namespace lockstep {

std::vector<std::string> ExampleNames() { return {"half_plus_two", "large_matmul"}; }

namespace {

Model HalfPlusTwo() {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  std::string a = g.Const("a", Tensor::Scalar<float>(0.5f));
  std::string b = g.Const("b", Tensor::Scalar<float>(2.0f));
  std::string y = g.Op("Add", {g.Op("Mul", {x, a}, {}, "mul"), b}, {}, "y");
  g.AddSignature({std::string(kDefaultSignature), "tensorflow/serving/predict",
                  {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"y", y, DType::kFloat32, Shape{-1}}}});
  // TF Serving's half_plus_two also answers classify and regress on tf.Examples with a
  // feature "x"; so does ours (the signature input key names the feature).
  g.AddSignature({"regress_x_to_y", "tensorflow/serving/regress",
                  {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"outputs", y, DType::kFloat32, Shape{-1}}}});
  std::string scores = g.Op("Reshape", {y}, {{"shape", std::vector<int64_t>{-1, 1}}}, "scores");
  g.AddSignature({"classify_x_to_y", "tensorflow/serving/classify",
                  {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"scores", scores, DType::kFloat32, Shape{-1, 1}}}});
  g.SetMetadata("name", "half_plus_two");
  g.SetMetadata("description", "y = 0.5 * x + 2");
  return std::move(g).Build();
}

// y = x W with W a 5792 x 5792 float32 matrix (128 MiB) of fixed pseudo-random values: a bundle
// large enough to load for seconds, for measuring what a large load does to other models
// (bench/serving/run_load_isolation.sh).
Model LargeMatmul() {
  constexpr int64_t kWidth = 5792;
  Tensor w(DType::kFloat32, Shape{kWidth, kWidth});
  uint32_t state = 12345;
  for (float& v : w.mutable_data<float>()) {
    state = state * 1664525u + 1013904223u;  // an LCG: the same bundle on every machine
    v = static_cast<float>(state >> 8) * 0x1.0p-24f - 0.5f;
  }
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, kWidth});
  std::string y = g.Op("MatMul", {x, g.Const("w", std::move(w))}, {}, "y");
  g.AddSignature({std::string(kDefaultSignature), "tensorflow/serving/predict",
                  {{"x", x, DType::kFloat32, Shape{-1, kWidth}}},
                  {{"y", y, DType::kFloat32, Shape{-1, kWidth}}}});
  g.SetMetadata("name", "large_matmul");
  g.SetMetadata("description", "y = x W, W 5792 x 5792 float32 (128 MiB)");
  return std::move(g).Build();
}

}  // namespace

StatusOr<Model> MakeExample(const std::string& name) {
  if (name == "half_plus_two") return HalfPlusTwo();
  if (name == "large_matmul") return LargeMatmul();
  std::string known;
  for (const auto& n : ExampleNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown example '" + name + "' (known: " + known + ")");
}

}  // namespace lockstep
