// Shared by the model store tests: a scratch directory, a tiny servable model whose answer
// tells which version served it, and helpers to run it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model_store/loader.h"
#include "runtime/bundle/bundle.h"
#include "tests/common/scratch_dir.h"
#include "runtime/graph_builder.h"

namespace lockstep::store_test {

namespace fs = std::filesystem;

using ::lockstep::test::ScratchDir;

// y = a * x + b over a float vector x.
inline Model AffineModel(float a, float b) {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  const std::string ca = g.Const("a", Tensor::Scalar<float>(a));
  const std::string cb = g.Const("b", Tensor::Scalar<float>(b));
  const std::string ax = g.Op("Mul", {x, ca});
  const std::string y = g.Op("Add", {ax, cb});
  Signature sig{std::string(kDefaultSignature), "tensorflow/serving/predict", {}, {}};
  sig.inputs.push_back({"x", x, DType::kFloat32, Shape{-1}});
  sig.outputs.push_back({"y", y, DType::kFloat32, Shape{-1}});
  g.AddSignature(std::move(sig));
  return std::move(g).Build();
}

// Writes version `v` under `base` as y = v * x: the answer for x = 1 is the version.
inline void WriteVersion(const fs::path& base, int64_t v, std::map<std::string, std::string> assets = {}) {
  BundleWriteOptions options;
  options.assets = std::move(assets);
  options.overwrite = true;
  const Status s = WriteBundle(AffineModel(static_cast<float>(v), 0.0f), base / std::to_string(v), options);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

inline void FlipByte(const fs::path& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x40));
  ASSERT_TRUE(f.good()) << path;
}

// Runs the model at x = [1] and answers y[0], or NaN (with a test failure message) on error.
inline StatusOr<float> RunOnce(const LoadedVersion& loaded) {
  std::vector<NamedTensor> inputs;
  inputs.push_back({"x", Tensor::FromVector<float>(Shape{1}, {1.0f})});
  std::vector<NamedTensor> outputs;
  Status s = loaded.session().Run(kDefaultSignature, inputs, &outputs);
  if (!s.ok()) return s;
  if (outputs.size() != 1) return Internal("expected one output");
  return outputs[0].tensor.data<float>()[0];
}

// Polls `pred` every 5 ms for at most `timeout`.
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace lockstep::store_test
