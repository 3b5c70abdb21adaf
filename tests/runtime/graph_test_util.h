// Builders of small models for session and pass tests.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "runtime/graph_builder.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"

namespace lockstep::testing {

inline Tensor RandomTensor(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::kFloat32, shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.mutable_data<float>()) v = dist(rng);
  return t;
}

inline Signature OneInOneOut(const std::string& in, Shape in_shape, const std::string& out, Shape out_shape) {
  return {"serving_default", "", {{"x", in, DType::kFloat32, in_shape}}, {{"y", out, DType::kFloat32, out_shape}}};
}

// x[-1, widths[0]] -> (MatMul -> BiasAdd -> Relu)* -> MatMul -> BiasAdd -> Softmax.
inline Model Mlp(const std::vector<int64_t>& widths, uint32_t seed) {
  std::mt19937 rng(seed);
  GraphBuilder g;
  std::string h = g.Input("x", DType::kFloat32, Shape{-1, widths[0]});
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    std::string w = g.Variable("w" + std::to_string(l), RandomTensor(Shape{widths[l], widths[l + 1]}, rng));
    std::string b = g.Variable("b" + std::to_string(l), RandomTensor(Shape{widths[l + 1]}, rng));
    h = g.Op("BiasAdd", {g.Op("MatMul", {h, w}), b});
    h = g.Op(l + 2 < widths.size() ? "Relu" : "Softmax", {h});
  }
  g.AddSignature(OneInOneOut("x", Shape{-1, widths[0]}, h, Shape{-1, widths.back()}));
  return std::move(g).Build();
}

inline int CountOps(const Model& m, const std::string& op) {
  int n = 0;
  for (const NodeDef& node : m.graph.nodes) n += node.op == op;
  return n;
}

// A Transpose of v by `perm` named `name`: what an NCHW model's importer puts around an NHWC op.
inline const std::vector<int64_t> kToNchw{0, 3, 1, 2}, kToNhwc{0, 2, 3, 1};
inline std::string ToLayout(GraphBuilder& g, const std::string& v, const std::vector<int64_t>& perm, const char* name) {
  return g.Op("Transpose", {v}, AttrMap{{"perm", perm}}, name);
}

// The model as it is, passes off (so that a test sees what its own rewrite did).
inline std::vector<NamedTensor> RunUnoptimised(Model model, const std::vector<NamedTensor>& inputs) {
  SessionOptions options;
  options.optimize = false;
  auto session = Session::Create(std::move(model), options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  std::vector<NamedTensor> out;
  if (session.ok()) {
    EXPECT_TRUE((*session)->Run("serving_default", inputs, &out).ok());
  }
  return out;
}

// `model`'s first output with the passes on, on each pool: the same bits as with them off.
inline void ExpectOptimisedIsPlain(const Model& model, const std::vector<NamedTensor>& inputs,
                            std::initializer_list<ThreadPool*> pools) {
  auto run = [&](bool optimize, ThreadPool* pool) {
    SessionOptions options;
    options.optimize = optimize;
    options.pool = pool;
    auto session = Session::Create(model, options);
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    std::vector<NamedTensor> out;
    if (session.ok()) {
      EXPECT_TRUE((*session)->Run("serving_default", inputs, &out).ok());
    }
    return out.empty() ? Tensor() : out[0].tensor;
  };
  const Tensor plain = run(false, *pools.begin());
  for (ThreadPool* pool : pools) EXPECT_TRUE(run(true, pool).BitwiseEqual(plain)) << pool->num_threads() << " threads";
}

}  // namespace lockstep::testing
