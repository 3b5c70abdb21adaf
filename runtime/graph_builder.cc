#include "runtime/graph_builder.h"

#include "runtime/op_registry.h"

namespace lockstep {

std::string GraphBuilder::Input(const std::string& name, DType dtype, const Shape& shape) {
  model_.graph.nodes.push_back({name, std::string(kInputOp), {}, AttrMap{{"dtype", dtype}, {"shape", shape}}});
  return name;
}

std::string GraphBuilder::Const(const std::string& name, Tensor value) {
  model_.weights[name] = std::move(value);
  model_.graph.nodes.push_back({name, std::string(kConstOp), {}, AttrMap{{"weight", name}}});
  return name;
}

std::string GraphBuilder::Variable(const std::string& name, Tensor value) {
  model_.weights[name] = std::move(value);
  model_.graph.nodes.push_back({name, std::string(kVariableOp), {}, AttrMap{{"weight", name}}});
  return name;
}

std::string GraphBuilder::Op(const std::string& op, std::vector<std::string> inputs, AttrMap attrs,
                             std::string name) {
  if (name.empty()) name = op + "_" + std::to_string(counter_++);
  model_.graph.nodes.push_back({name, op, std::move(inputs), std::move(attrs)});
  return name;
}

}  // namespace lockstep
