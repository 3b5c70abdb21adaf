// Gradient checks against central finite differences in float64, shared by the gradient
// tests. CheckGradients builds a small float64 graph y = f(x1, x2, ...), the loss sum(y * r)
// with a fixed random r (so every element of y counts, each differently), adds the backward
// graph with AddGradients, and compares each input's gradient with
// (loss(x + h e) - loss(x - h e)) / 2h element by element.
//
// Tolerance: with h = 1e-6 the difference quotient is off by about h^2 |f'''| + u64 |loss| / h,
// around 1e-10 for these functions of values of order 1; 1e-7 relative (plus 1e-7 absolute)
// leaves a wide margin while any wrong term in a gradient is off by far more.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/autodiff/gradients.h"
#include "runtime/graph_builder.h"
#include "runtime/session.h"

namespace lockstep::grad_test {

inline Tensor RandomF64(const Shape& shape, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (double& x : v) {
    x = dist(rng);
    if (rng() % 2 == 0 && lo >= 0) x = -x;  // both signs, magnitudes in [lo, hi]
  }
  return Tensor::FromVector<double>(shape, v);
}

struct GradCase {
  std::string name;
  std::vector<Shape> input_shapes;
  // Builds y from the inputs; returns y's name and shape.
  std::function<std::pair<std::string, Shape>(GraphBuilder&, const std::vector<std::string>&)> build;
  double lo = 0.1, hi = 1.0;  // input magnitudes (away from Relu's kink at 0)
  bool positive = false;      // inputs all positive (a divisor)
};

inline void CheckGradients(const GradCase& c) {
  SCOPED_TRACE(c.name);
  GraphBuilder g;
  std::vector<std::string> inputs;
  Signature sig;
  sig.name = "grads";
  for (size_t i = 0; i < c.input_shapes.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    inputs.push_back(g.Input(name, DType::kFloat64, c.input_shapes[i]));
    sig.inputs.push_back({name, inputs.back(), DType::kFloat64, c.input_shapes[i]});
  }
  auto [y, y_shape] = c.build(g, inputs);
  const std::string r = g.Const("r", RandomF64(y_shape, 99, 0.5, 1.5));
  const std::string loss = g.Op("Sum", {g.Op("Mul", {y, r})}, {}, "loss");
  sig.outputs.push_back({"loss", loss, DType::kFloat64, Shape{}});
  g.AddSignature(sig);
  Model model = std::move(g).Build();
  StatusOr<std::vector<std::string>> grads = AddGradients(model, loss, inputs);
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  for (size_t i = 0; i < inputs.size(); ++i) {
    model.graph.signatures[0].outputs.push_back(
        {"d" + inputs[i], grads.value()[i], DType::kFloat64, c.input_shapes[i]});
  }
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(model), {});
  ASSERT_TRUE(session.ok()) << session.status().ToString();

  std::vector<NamedTensor> feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = RandomF64(c.input_shapes[i], 7 + i, c.lo, c.hi);
    if (c.positive) {
      for (double& v : t.mutable_data<double>()) v = std::fabs(v);
    }
    feed.push_back({inputs[i], t});
  }
  std::vector<NamedTensor> out;
  ASSERT_TRUE(session.value()->Run("grads", feed, &out).ok());
  auto loss_at = [&](std::vector<NamedTensor> at) {
    std::vector<NamedTensor> o;
    EXPECT_TRUE(session.value()->Run("grads", at, &o).ok());
    return o[0].tensor.data<double>()[0];
  };
  constexpr double h = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& analytic = out[i + 1].tensor;
    ASSERT_EQ(analytic.shape(), c.input_shapes[i]) << "gradient of " << inputs[i];
    for (int64_t e = 0; e < analytic.num_elements(); ++e) {
      std::vector<NamedTensor> plus = feed, minus = feed;
      plus[i].tensor = Tensor::FromVector<double>(
          c.input_shapes[i], {feed[i].tensor.data<double>().begin(), feed[i].tensor.data<double>().end()});
      minus[i].tensor = Tensor::FromVector<double>(
          c.input_shapes[i], {feed[i].tensor.data<double>().begin(), feed[i].tensor.data<double>().end()});
      plus[i].tensor.mutable_data<double>()[static_cast<size_t>(e)] += h;
      minus[i].tensor.mutable_data<double>()[static_cast<size_t>(e)] -= h;
      const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * h);
      const double got = analytic.data<double>()[static_cast<size_t>(e)];
      EXPECT_NEAR(got, numeric, 1e-7 + 1e-7 * std::fabs(numeric)) << inputs[i] << "[" << e << "]";
    }
  }
}

inline std::pair<std::string, Shape> Unary(GraphBuilder& g, const std::string& op, const std::string& x,
                                           const Shape& s, AttrMap attrs = {}) {
  return {g.Op(op, {x}, std::move(attrs)), s};
}

}  // namespace lockstep::grad_test
