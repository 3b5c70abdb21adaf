#include "runtime/autodiff/gradients.h"

#include <map>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/graph_analysis.h"

namespace lockstep {
namespace {

struct ValueLess {
  bool operator()(const ValueId& a, const ValueId& b) const {
    return a.node != b.node ? a.node < b.node : a.output < b.output;
  }
};

}  // namespace

StatusOr<std::vector<std::string>> AddGradients(Model& model, const std::string& loss,
                                                std::span<const std::string> wrt,
                                                const OpRegistry& registry) {
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  LS_ASSIGN_OR_RETURN(ValueId loss_id, a.Resolve(loss));
  const TensorSpec& loss_spec = a.Spec(loss_id);
  if (loss_spec.dtype != DType::kFloat32 && loss_spec.dtype != DType::kFloat64) {
    return InvalidArgument("gradients: the loss '" + loss + "' must be float32 or float64, got " +
                           std::string(DTypeName(loss_spec.dtype)));
  }
  if (loss_spec.shape.rank() != 0) {
    return InvalidArgument("gradients: the loss '" + loss + "' must be a scalar, got shape " +
                           loss_spec.shape.ToString());
  }
  const size_t n = model.graph.nodes.size();
  std::vector<ValueId> wrt_ids;
  // Nodes downstream of a wrt value (forward), and upstream of the loss (backward).
  std::vector<bool> from_wrt(n, false), to_loss(n, false);
  for (const std::string& w : wrt) {
    LS_ASSIGN_OR_RETURN(ValueId id, a.Resolve(w));
    wrt_ids.push_back(id);
    from_wrt[static_cast<size_t>(id.node)] = true;
  }
  for (int node : a.topological_order) {
    for (ValueId in : a.inputs[static_cast<size_t>(node)]) {
      if (from_wrt[static_cast<size_t>(in.node)]) from_wrt[static_cast<size_t>(node)] = true;
    }
  }
  to_loss[static_cast<size_t>(loss_id.node)] = true;
  for (auto it = a.topological_order.rbegin(); it != a.topological_order.rend(); ++it) {
    if (!to_loss[static_cast<size_t>(*it)]) continue;
    for (ValueId in : a.inputs[static_cast<size_t>(*it)]) to_loss[static_cast<size_t>(in.node)] = true;
  }

  int counter = 0;
  std::map<ValueId, std::vector<std::string>, ValueLess> partials;
  // The sum of a value's partial gradients, in the order they arrived.
  auto total = [&](ValueId v, const std::string& owner) -> std::string {
    auto it = partials.find(v);
    if (it == partials.end()) return "";
    std::string sum = it->second[0];
    for (size_t i = 1; i < it->second.size(); ++i) {
      NodeDef add;
      add.name = "gradients/" + owner + "/AddN_" + std::to_string(counter++);
      add.op = "Add";
      add.inputs = {sum, it->second[i]};
      sum = add.name;
      model.graph.nodes.push_back(std::move(add));
    }
    return sum;
  };

  {
    const std::string one = "gradients/" + model.graph.nodes[static_cast<size_t>(loss_id.node)].name + "/one";
    model.weights[one] =
        loss_spec.dtype == DType::kFloat64 ? Tensor::Scalar<double>(1.0) : Tensor::Scalar<float>(1.0f);
    NodeDef c;
    c.name = one;
    c.op = std::string(kConstOp);
    c.attrs.Set("weight", one);
    model.graph.nodes.push_back(std::move(c));
    partials[loss_id].push_back(one);
  }

  for (auto it = a.topological_order.rbegin(); it != a.topological_order.rend(); ++it) {
    const auto node = static_cast<size_t>(*it);
    if (!from_wrt[node] || !to_loss[node]) continue;
    const OpDef* op = a.ops[node];
    const std::string name = model.graph.nodes[node].name;
    if (op->name == kInputOp || op->name == kConstOp || op->name == kVariableOp) continue;
    const size_t outputs = a.outputs[node].size();
    std::vector<std::string> output_grads(outputs);
    bool any = false;
    for (size_t o = 0; o < outputs; ++o) {
      output_grads[o] = total(ValueId{static_cast<int>(node), static_cast<int>(o)}, name);
      any = any || !output_grads[o].empty();
    }
    if (!any) continue;
    std::vector<bool> needs;
    for (ValueId in : a.inputs[node]) {
      needs.push_back(from_wrt[static_cast<size_t>(in.node)]);
    }
    if (op->gradient == nullptr) {
      return Unimplemented("gradients: op " + op->name + " (node '" + name + "') has no gradient");
    }
    GradientBuilder builder(model, a, static_cast<int>(node), std::move(output_grads), needs, counter);
    LS_RETURN_IF_ERROR(op->gradient(builder).WithPrefix("gradients: node '" + name + "' (" + op->name + ")"));
    for (size_t i = 0; i < needs.size(); ++i) {
      const std::string& g = builder.input_grads()[i];
      if (needs[i] && !g.empty()) partials[a.inputs[node][i]].push_back(g);
    }
  }

  std::vector<std::string> result;
  for (size_t i = 0; i < wrt_ids.size(); ++i) {
    std::string g = total(wrt_ids[i], model.graph.nodes[static_cast<size_t>(wrt_ids[i].node)].name);
    if (g.empty()) {
      return InvalidArgument("gradients: '" + std::string(wrt[i]) + "' does not reach the loss '" + loss +
                             "'");
    }
    result.push_back(std::move(g));
  }
  return result;
}

}  // namespace lockstep
