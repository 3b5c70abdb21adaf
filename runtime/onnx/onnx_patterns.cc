#include "runtime/onnx/onnx_patterns.h"

#include <cmath>
#include <vector>

#include "runtime/import/constants.h"

namespace lockstep::onnx_import {
namespace {

using onnx::NodeProto;

// Looks along the ONNX graph from one node: producers and the constants behind names.
class Graph {
 public:
  explicit Graph(const OnnxNodeContext& ctx) : sink_(ctx.sink()) {}

  // The node producing `name` when it is a `op` with `inputs` inputs.
  const NodeProto* Op(const std::string& name, const char* op, int inputs) const {
    const NodeProto* n = sink_.Producer(name);
    return n != nullptr && n->op_type() == op && n->input_size() == inputs && n->domain().empty() ? n : nullptr;
  }
  // Whether `name` is a one-element constant within `tolerance` (relative) of `value`.
  bool IsScalar(const std::string& name, double value, double tolerance = 1e-6) const {
    const std::optional<double> d = Scalar(name);
    return d && std::abs(*d - value) <= tolerance * std::abs(value);
  }
  // The value of `name` when it is a one-element constant.
  std::optional<double> Scalar(const std::string& name) const {
    const std::string v = sink_.Translated(name);
    const Tensor* t = v.empty() ? nullptr : sink_.ConstantValue(v);
    if (t == nullptr || t->num_elements() != 1) return std::nullopt;
    StatusOr<double> d = ScalarValue(*t);
    return d.ok() ? std::optional<double>(*d) : std::nullopt;
  }

 private:
  const OnnxGraphSink& sink_;
};

int64_t IntAttr(const NodeProto& n, const char* name, int64_t fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name && a.type() == onnx::AttributeProto::INT) return a.i();
  }
  return fallback;
}

// Whether ReduceMean node `n` averages the last axis of a rank-`rank` value, keeping it.
bool MeanOfLastAxis(const NodeProto& n, int rank) {
  if (IntAttr(n, "keepdims", 1) != 1) return false;
  for (const auto& a : n.attribute()) {
    if (a.name() != "axes") continue;
    return a.ints_size() == 1 && (a.ints(0) == -1 || a.ints(0) == rank - 1);
  }
  return false;  // no axes: every axis
}

}  // namespace

std::optional<std::string> MatchErfGelu(const OnnxNodeContext& ctx) {
  const Graph g(ctx);
  const NodeProto& mul = ctx.node();
  if (mul.op_type() != "Mul" || mul.input_size() != 2) return std::nullopt;
  // The three factors of Mul(Mul(a, b), c) or Mul(c, Mul(a, b)).
  for (int inner_side = 0; inner_side < 2; ++inner_side) {
    const NodeProto* inner = g.Op(mul.input(inner_side), "Mul", 2);
    if (inner == nullptr) continue;
    const std::string factors[3] = {inner->input(0), inner->input(1), mul.input(1 - inner_side)};
    for (int half = 0; half < 3; ++half) {
      if (!g.IsScalar(factors[half], 0.5)) continue;
      for (int plus = 0; plus < 3; ++plus) {
        if (plus == half) continue;
        const std::string& x = factors[3 - half - plus];
        const NodeProto* add = g.Op(factors[plus], "Add", 2);
        if (add == nullptr) continue;
        for (int one = 0; one < 2; ++one) {
          if (!g.IsScalar(add->input(one), 1.0)) continue;
          const NodeProto* erf = g.Op(add->input(1 - one), "Erf", 1);
          if (erf == nullptr) continue;
          const NodeProto* div = g.Op(erf->input(0), "Div", 2);
          const NodeProto* scale = g.Op(erf->input(0), "Mul", 2);
          if (div != nullptr && div->input(0) == x && g.IsScalar(div->input(1), std::sqrt(2.0))) return x;
          if (scale != nullptr) {
            for (int k = 0; k < 2; ++k) {
              if (scale->input(k) == x && g.IsScalar(scale->input(1 - k), 1 / std::sqrt(2.0))) return x;
            }
          }
        }
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> MatchSilu(const OnnxNodeContext& ctx) {
  const Graph g(ctx);
  const NodeProto& mul = ctx.node();
  if (mul.op_type() != "Mul" || mul.input_size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const NodeProto* sigmoid = g.Op(mul.input(side), "Sigmoid", 1);
    if (sigmoid != nullptr && sigmoid->input(0) == mul.input(1 - side)) return mul.input(1 - side);
  }
  return std::nullopt;
}

std::optional<LayerNormMatch> MatchLayerNorm(const OnnxNodeContext& ctx) {
  const Graph g(ctx);
  const NodeProto& div = ctx.node();
  const auto& spec = ctx.InputSpec(0);
  if (div.op_type() != "Div" || div.input_size() != 2 || !spec || spec->shape.rank() < 1) return std::nullopt;
  const int rank = spec->shape.rank();
  const std::string& centred = div.input(0);
  const NodeProto* sub = g.Op(centred, "Sub", 2);
  if (sub == nullptr) return std::nullopt;
  const std::string& x = sub->input(0);
  const NodeProto* mean = g.Op(sub->input(1), "ReduceMean", 1);
  if (mean == nullptr || mean->input(0) != x || !MeanOfLastAxis(*mean, rank)) return std::nullopt;
  const NodeProto* sqrt = g.Op(div.input(1), "Sqrt", 1);
  const NodeProto* add = sqrt == nullptr ? nullptr : g.Op(sqrt->input(0), "Add", 2);
  if (add == nullptr) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const std::optional<double> epsilon = g.Scalar(add->input(side));
    const NodeProto* var = g.Op(add->input(1 - side), "ReduceMean", 1);
    if (!epsilon || *epsilon < 0 || var == nullptr || !MeanOfLastAxis(*var, rank)) continue;
    const NodeProto* pow = g.Op(var->input(0), "Pow", 2);
    const NodeProto* square = g.Op(var->input(0), "Mul", 2);
    const bool squared = (pow != nullptr && pow->input(0) == centred && g.IsScalar(pow->input(1), 2.0, 0)) ||
                         (square != nullptr && square->input(0) == centred && square->input(1) == centred);
    if (squared) return LayerNormMatch{x, *epsilon};
  }
  return std::nullopt;
}

}  // namespace lockstep::onnx_import
