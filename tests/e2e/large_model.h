// A 128 MiB model, the size of model-cli's large_matmul: y = x W with W 5792 x 5792 float32,
// pseudo-random per version, for the tests of what large models meet (swaps, crashes).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "runtime/graph_builder.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {

inline constexpr int64_t kLargeWidth = 5792;
inline constexpr double kLargeModelBytes = static_cast<double>(kLargeWidth * kLargeWidth * sizeof(float));

inline void WriteLargeVersion(const fs::path& base, int64_t version) {
  Tensor w(DType::kFloat32, Shape{kLargeWidth, kLargeWidth});
  uint32_t state = static_cast<uint32_t>(version) * 2654435761u;
  for (float& v : w.mutable_data<float>()) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  }
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1, kLargeWidth});
  const std::string y = g.Op("MatMul", {x, g.Const("w", std::move(w))}, {}, "y");
  g.AddSignature({std::string(kDefaultSignature), "tensorflow/serving/predict",
                  {{"x", x, DType::kFloat32, Shape{-1, kLargeWidth}}},
                  {{"y", y, DType::kFloat32, Shape{-1, kLargeWidth}}}});
  const Status s = WriteBundle(std::move(g).Build(), base / std::to_string(version));
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// A REST predict body of one row of `value`s.
inline std::string LargePredictBody(const std::string& value = "0.001") {
  std::string body = R"({"instances": [[)";
  for (int64_t i = 0; i < kLargeWidth; ++i) body += (i == 0 ? "" : ",") + value;
  return body + "]]}";
}

}  // namespace lockstep::e2e
