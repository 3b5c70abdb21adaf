#include "runtime/autodiff/gradient_builder.h"

namespace lockstep {
namespace {

std::string Ref(const std::string& node, int output) {
  return output == 0 ? node : node + ":" + std::to_string(output);
}

}  // namespace

GradientBuilder::GradientBuilder(Model& model, const GraphAnalysis& analysis, int node,
                                 std::vector<std::string> output_grads, std::vector<bool> needs_input_grad,
                                 int& counter)
    : model_(model),
      analysis_(analysis),
      node_(node),
      output_grads_(std::move(output_grads)),
      needs_input_grad_(std::move(needs_input_grad)),
      input_grads_(needs_input_grad_.size()),
      counter_(counter) {}

std::string GradientBuilder::input(int i) const {
  const ValueId v = analysis_.inputs[static_cast<size_t>(node_)][static_cast<size_t>(i)];
  return Ref(model_.graph.nodes[static_cast<size_t>(v.node)].name, v.output);
}

std::string GradientBuilder::output(int i) const {
  return Ref(node().name, i);
}

const TensorSpec& GradientBuilder::input_spec(int i) const {
  return analysis_.Spec(analysis_.inputs[static_cast<size_t>(node_)][static_cast<size_t>(i)]);
}

const Tensor* GradientBuilder::constant_input(int i) const {
  const ValueId v = analysis_.inputs[static_cast<size_t>(node_)][static_cast<size_t>(i)];
  const NodeDef& producer = model_.graph.nodes[static_cast<size_t>(v.node)];
  if (producer.op != kConstOp) return nullptr;
  StatusOr<std::string_view> weight = producer.attrs.GetStringViewOr("weight", "");
  if (!weight.ok()) return nullptr;
  auto it = model_.weights.find(*weight);
  return it == model_.weights.end() ? nullptr : &it->second;
}

const TensorSpec& GradientBuilder::output_spec(int i) const {
  return analysis_.outputs[static_cast<size_t>(node_)][static_cast<size_t>(i)];
}

std::string GradientBuilder::NewName(std::string_view what) {
  // The forward node's name keeps a backward graph readable; the counter keeps names unique.
  return "gradients/" + node().name + "/" + std::string(what) + "_" + std::to_string(counter_++);
}

std::string GradientBuilder::Op(std::string_view op, std::vector<std::string> inputs, AttrMap attrs) {
  NodeDef n;
  n.name = NewName(op);
  n.op = std::string(op);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  std::string name = n.name;
  model_.graph.nodes.push_back(std::move(n));
  return name;
}

std::string GradientBuilder::Scalar(DType dtype, double value) {
  return Constant(dtype == DType::kFloat64 ? Tensor::Scalar<double>(value)
                                           : Tensor::Scalar<float>(static_cast<float>(value)));
}

std::string GradientBuilder::Constant(Tensor value) {
  const std::string name = NewName("Const");
  model_.weights[name] = std::move(value);
  NodeDef n;
  n.name = name;
  n.op = std::string(kConstOp);
  n.attrs.Set("weight", name);
  model_.graph.nodes.push_back(std::move(n));
  return name;
}

}  // namespace lockstep
