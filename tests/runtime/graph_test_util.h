// Builders of small models for session and pass tests.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "runtime/graph_builder.h"

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

}  // namespace lockstep::testing
