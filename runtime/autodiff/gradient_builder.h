// GradientBuilder: what an op's gradient function (OpDef::gradient) sees and does. It reads
// the forward node, its inputs' and outputs' specs and the gradients arriving at its outputs;
// it adds backward nodes to the model and gives each input its gradient. Gradient functions
// live beside their ops' forward kernels (runtime/ops/); AddGradients (gradients.h) calls
// them in reverse topological order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/graph.h"
#include "runtime/graph_analysis.h"

namespace lockstep {

class GradientBuilder {
 public:
  GradientBuilder(Model& model, const GraphAnalysis& analysis, int node,
                  std::vector<std::string> output_grads, std::vector<bool> needs_input_grad, int& counter);

  const NodeDef& node() const { return model_.graph.nodes[static_cast<size_t>(node_)]; }
  const AttrMap& attrs() const { return node().attrs; }
  int num_inputs() const { return static_cast<int>(analysis_.inputs[static_cast<size_t>(node_)].size()); }
  // References to the forward values, for use as backward nodes' inputs.
  std::string input(int i) const;
  std::string output(int i) const;
  const TensorSpec& input_spec(int i) const;
  // The value of input i when it is a constant (a Const node's weight), else null: what a
  // gradient reads of bounds and axes given as inputs.
  const Tensor* constant_input(int i) const;
  const TensorSpec& output_spec(int i) const;
  // The gradient of the loss with respect to output i; "" when output i does not reach the loss.
  const std::string& output_grad(int i) const { return output_grads_[static_cast<size_t>(i)]; }
  // Whether input i lies on a path from a value whose gradient was asked for; a gradient
  // function may skip the others.
  bool needs_input_grad(int i) const { return needs_input_grad_[static_cast<size_t>(i)]; }

  // Adds a backward node and returns its output 0.
  std::string Op(std::string_view op, std::vector<std::string> inputs, AttrMap attrs = {});
  // A scalar constant of `dtype` (float32 or float64).
  std::string Scalar(DType dtype, double value);
  // A constant holding `value`.
  std::string Constant(Tensor value);
  void SetInputGrad(int i, std::string grad) { input_grads_[static_cast<size_t>(i)] = std::move(grad); }

  // Set by the gradient function; "" for an input it gave none.
  const std::vector<std::string>& input_grads() const { return input_grads_; }

 private:
  std::string NewName(std::string_view what);

  Model& model_;
  const GraphAnalysis& analysis_;
  int node_;
  std::vector<std::string> output_grads_;
  std::vector<bool> needs_input_grad_;
  std::vector<std::string> input_grads_;
  int& counter_;
};

// Gradients are taken of float32 and float64 values only; other dtypes are not differentiable,
// with one exception: a bfloat16 value made by a Cast from float32 (mixed precision's weights),
// whose gradient is float32 (every op that reads bf16 computes in float32 and its gradients
// come out float32).
inline Status CheckDifferentiable(const GradientBuilder& g) {
  const DType d = g.output_spec(0).dtype;
  if (d == DType::kFloat32 || d == DType::kFloat64) return Status::Ok();
  return InvalidArgument("cannot differentiate a " + std::string(DTypeName(d)) + " value");
}

// The input gradients of a matrix product C = op(A) op(B) (op: transposed when ta / tb), each
// made by `product(x, y, tx, ty)`, the product op(x) op(y) of the same kind. With dC the
// gradient of C:
//   C = A B:     dA = dC B^T,    dB = A^T dC
//   C = A^T B:   dA = B dC^T,    dB = A dC
//   C = A B^T:   dA = dC B,      dB = dC^T A
//   C = A^T B^T: dA = B^T dC^T,  dB = dC^T A^T
template <typename Product>
void SetMatrixProductGrads(GradientBuilder& g, bool ta, bool tb, const Product& product) {
  const std::string& dc = g.output_grad(0);
  const std::string a = g.input(0), b = g.input(1);
  if (g.needs_input_grad(0)) {
    g.SetInputGrad(0, !ta ? (!tb ? product(dc, b, false, true) : product(dc, b, false, false))
                          : (!tb ? product(b, dc, false, true) : product(b, dc, true, true)));
  }
  if (g.needs_input_grad(1)) {
    g.SetInputGrad(1, !tb ? (!ta ? product(a, dc, true, false) : product(a, dc, false, false))
                          : (!ta ? product(dc, a, true, false) : product(dc, a, true, true)));
  }
}

}  // namespace lockstep
