// If, Loop and Scan: each subgraph becomes a body (OnnxGraphSink::ImportBody) held in an
// attribute of the runtime's op of the same name (runtime/ops/control_flow_ops.cc), and what a
// body reads of the enclosing graph becomes the node's trailing inputs. Scan's axes other than
// the first are moved there and back with Transposes around the node, so the runtime's Scan
// walks axis 0 only. Scan of opset 8, whose every input has a batch axis first (and its scan
// inputs the sequence second), is a Scan over the batch whose body is the Scan over the
// sequence.
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/import/constants.h"
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {
namespace {

void AddOutputs(const std::string& node, int count, std::vector<std::string>* outputs) {
  for (int k = 0; k < count; ++k) outputs->push_back(k == 0 ? node : node + ":" + std::to_string(k));
}

const Signature& BodySignature(const OnnxBody& body) { return body.graph->signatures[0]; }

// The permutation that moves axis `from` of a rank-`rank` value to position `to`, the others
// keeping their order.
std::vector<int64_t> MoveAxis(int rank, int from, int to) {
  std::vector<int64_t> perm;
  for (int d = 0; d < rank; ++d) {
    if (d != from) perm.push_back(d);
  }
  perm.insert(perm.begin() + to, from);
  return perm;
}

StatusOr<int> NormalizedAxis(const OnnxNodeContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.Error("axis " + std::to_string(axis) + " is outside a value of rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace

Status If(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const onnx::GraphProto* then_graph, ctx.GraphAttr("then_branch"));
  LS_ASSIGN_OR_RETURN(const onnx::GraphProto* else_graph, ctx.GraphAttr("else_branch"));
  if (then_graph->output_size() != else_graph->output_size()) {
    return ctx.Error("the branches give " + std::to_string(then_graph->output_size()) + " and " +
                     std::to_string(else_graph->output_size()) + " outputs");
  }
  if (const Tensor* cond = ctx.ConstantInput(0); cond != nullptr && cond->num_elements() == 1) {
    // A condition known at load (most often a dimension compared with 1, on a shape that is
    // known): the branch taken becomes part of this graph, and the values after it get its
    // ranks, which may differ from the other branch's.
    StatusOr<Tensor> flag = CastTensor(*cond, DType::kBool);
    if (!flag.ok()) return flag.status().WithPrefix("node '" + ctx.node().name() + "' (If) condition");
    const bool taken = flag->data<bool>()[0];
    StatusOr<std::vector<std::string>> branch = ctx.sink().InlineBody(taken ? *then_graph : *else_graph);
    if (!branch.ok()) {
      return branch.status().WithPrefix("node '" + ctx.node().name() + "' (If) " +
                                        (taken ? "then_branch" : "else_branch"));
    }
    *outputs = std::move(*branch);
    return Status::Ok();
  }
  StatusOr<OnnxBody> then_body = ctx.sink().ImportBody(*then_graph, {});
  if (!then_body.ok()) return then_body.status().WithPrefix("node '" + ctx.node().name() + "' (If) then_branch");
  StatusOr<OnnxBody> else_body = ctx.sink().ImportBody(*else_graph, {});
  if (!else_body.ok()) return else_body.status().WithPrefix("node '" + ctx.node().name() + "' (If) else_branch");
  std::vector<std::string> inputs{ctx.input(0)};
  inputs.insert(inputs.end(), then_body->captures.begin(), then_body->captures.end());
  inputs.insert(inputs.end(), else_body->captures.begin(), else_body->captures.end());
  const int n = then_graph->output_size();
  const std::string node = ctx.Emit("If", std::move(inputs),
                                    AttrMap{{"then_branch", then_body->graph},
                                            {"else_branch", else_body->graph},
                                            {"num_outputs", int64_t{n}}});
  AddOutputs(node, n, outputs);
  return Status::Ok();
}

Status Loop(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const onnx::GraphProto* graph, ctx.GraphAttr("body"));
  const size_t carried = ctx.num_inputs() < 2 ? 0 : ctx.num_inputs() - 2;
  if (graph->input_size() != static_cast<int>(2 + carried) || graph->output_size() < static_cast<int>(1 + carried)) {
    return ctx.Error("the body takes " + std::to_string(graph->input_size()) + " inputs and gives " +
                     std::to_string(graph->output_size()) + " outputs for " + std::to_string(carried) +
                     " carried values");
  }
  std::vector<std::optional<TensorSpec>> specs{TensorSpec{DType::kInt64, Shape{}}, TensorSpec{DType::kBool, Shape{}}};
  // A carried value may change shape from one iteration to the next (a sequence of tokens that
  // grows): its rank is the initial value's, its dimensions are known only at run time.
  for (size_t k = 0; k < carried; ++k) {
    std::optional<TensorSpec> spec = ctx.InputSpec(2 + k);
    for (int d = 0; spec && d < spec->shape.rank(); ++d) spec->shape.set_dim(d, Shape::kUnknownDim);
    specs.push_back(std::move(spec));
  }
  StatusOr<OnnxBody> body = ctx.sink().ImportBody(*graph, std::move(specs));
  if (!body.ok()) return body.status().WithPrefix("node '" + ctx.node().name() + "' (Loop) body");
  std::vector<std::string> inputs;
  if (ctx.HasInput(0)) inputs.push_back(ctx.input(0));
  if (ctx.HasInput(1)) inputs.push_back(ctx.input(1));
  for (size_t k = 0; k < carried; ++k) {
    if (!ctx.HasInput(2 + k)) return ctx.Unsupported("an omitted carried value");
    inputs.push_back(ctx.input(2 + k));
  }
  inputs.insert(inputs.end(), body->captures.begin(), body->captures.end());
  const int n = graph->output_size() - 1;
  const std::string node = ctx.Emit("Loop", std::move(inputs),
                                    AttrMap{{"body", body->graph},
                                            {"has_trip_count", ctx.HasInput(0)},
                                            {"has_condition", ctx.HasInput(1)},
                                            {"num_carried", static_cast<int64_t>(carried)},
                                            {"num_outputs", int64_t{n}}});
  AddOutputs(node, n, outputs);
  return Status::Ok();
}

// Opset 8: inputs (sequence_lens?, states..., scan inputs...), each with the batch first; the
// body sees one batch row. The node becomes Scan(states..., scan inputs..., captures...) over
// the batch, with no states of its own, whose body runs Scan(row's states, row's scan
// inputs, captures) over the sequence with the ONNX body.
Status ScanOverBatch(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.HasInput(0)) return ctx.Unsupported("sequence_lens (rows of different lengths) in a Scan of opset 8");
  LS_ASSIGN_OR_RETURN(const onnx::GraphProto* graph, ctx.GraphAttr("body"));
  LS_ASSIGN_OR_RETURN(int64_t scans, ctx.IntAttr("num_scan_inputs", -1));
  const auto total = static_cast<int64_t>(ctx.num_inputs()) - 1;
  if (scans < 1 || scans > total || graph->input_size() != total) {
    return ctx.Error("num_scan_inputs " + std::to_string(scans) + " does not fit " + std::to_string(total) +
                     " inputs and a body of " + std::to_string(graph->input_size()));
  }
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> directions, ctx.IntsAttr("directions"));
  // What the body sees: each input without its batch axis, and a scan input's row without its
  // sequence axis too.
  std::vector<std::optional<TensorSpec>> row_specs, step_specs;
  for (size_t k = 1; k < ctx.num_inputs(); ++k) {
    const auto& spec = ctx.InputSpec(k);
    const bool scan_input = k > static_cast<size_t>(total - scans);
    if (!spec || spec->shape.rank() < (scan_input ? 2 : 1)) return ctx.Error("input " + std::to_string(k) + " has no batch axis");
    TensorSpec row{spec->dtype, Shape()}, step{spec->dtype, Shape()};
    for (int d = 1; d < spec->shape.rank(); ++d) {
      row.shape.AddDim(spec->shape.dim(d));
      if (!scan_input || d > 1) step.shape.AddDim(spec->shape.dim(d));
    }
    row_specs.push_back(row);
    step_specs.push_back(step);
  }
  StatusOr<OnnxBody> body = ctx.sink().ImportBody(*graph, step_specs);
  if (!body.ok()) return body.status().WithPrefix("node '" + ctx.node().name() + "' (Scan) body");
  const Signature& inner_sig = BodySignature(*body);
  const auto states = static_cast<size_t>(total - scans);
  const int n = graph->output_size();

  // The body over the batch: its inputs are a row of each input, then the captures.
  Graph row;
  Signature sig{"body", "", {}, {}};
  std::vector<std::string> scan_inputs;
  for (size_t k = 0; k < inner_sig.inputs.size(); ++k) {
    const std::string name = "input_" + std::to_string(k);
    const TensorSpec spec = k < row_specs.size() ? *row_specs[k] : TensorSpec{inner_sig.inputs[k].dtype, inner_sig.inputs[k].shape};
    row.nodes.push_back(NodeDef{name, std::string(kInputOp), {}, AttrMap{{"dtype", spec.dtype}, {"shape", spec.shape}}});
    sig.inputs.push_back(TensorBinding{std::to_string(k), name, spec.dtype, spec.shape});
    scan_inputs.push_back(name);
  }
  AttrMap attrs{{"body", body->graph},
                {"num_states", static_cast<int64_t>(states)},
                {"num_scan_inputs", scans},
                {"num_outputs", int64_t{n}}};
  if (directions) attrs.Set("scan_input_directions", *directions);
  row.nodes.push_back(NodeDef{"scan", "Scan", std::move(scan_inputs), std::move(attrs)});
  for (int k = 0; k < n; ++k) {
    const TensorBinding& out = inner_sig.outputs[static_cast<size_t>(k)];
    Shape shape;
    if (static_cast<size_t>(k) >= states) shape.AddDim(row_specs[states]->shape.dim(0));  // the sequence
    for (int64_t d : out.shape.dims()) shape.AddDim(d);
    sig.outputs.push_back(TensorBinding{std::to_string(k), k == 0 ? std::string("scan") : "scan:" + std::to_string(k),
                                        out.dtype, shape});
  }
  row.signatures.push_back(std::move(sig));

  std::vector<std::string> inputs;
  for (size_t k = 1; k < ctx.num_inputs(); ++k) inputs.push_back(ctx.input(k));
  inputs.insert(inputs.end(), body->captures.begin(), body->captures.end());
  const std::string node = ctx.Emit("Scan", std::move(inputs),
                                    AttrMap{{"body", std::make_shared<const Graph>(std::move(row))},
                                            {"num_states", int64_t{0}},
                                            {"num_scan_inputs", static_cast<int64_t>(total)},
                                            {"num_outputs", int64_t{n}}});
  AddOutputs(node, n, outputs);
  return Status::Ok();
}

Status Scan(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  if (ctx.opset() < 9) return ScanOverBatch(ctx, outputs);
  LS_ASSIGN_OR_RETURN(const onnx::GraphProto* graph, ctx.GraphAttr("body"));
  LS_ASSIGN_OR_RETURN(int64_t scans, ctx.IntAttr("num_scan_inputs", -1));
  const auto total = static_cast<int64_t>(ctx.num_inputs());
  if (scans < 1 || scans > total || graph->input_size() != total) {
    return ctx.Error("num_scan_inputs " + std::to_string(scans) + " does not fit " + std::to_string(total) +
                     " inputs and a body of " + std::to_string(graph->input_size()));
  }
  const auto states = static_cast<size_t>(total - scans);
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> input_axes, ctx.IntsAttr("scan_input_axes"));
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> input_directions, ctx.IntsAttr("scan_input_directions"));
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_axes, ctx.IntsAttr("scan_output_axes"));
  LS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_directions, ctx.IntsAttr("scan_output_directions"));
  if (input_axes && input_axes->size() != static_cast<size_t>(scans)) return ctx.Error("one scan_input_axes per scan input");

  std::vector<std::string> inputs;
  std::vector<std::optional<TensorSpec>> specs;
  for (size_t k = 0; k < states; ++k) {
    inputs.push_back(ctx.input(k));
    specs.push_back(ctx.InputSpec(k));
  }
  for (size_t k = 0; k < static_cast<size_t>(scans); ++k) {
    LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(states + k));
    LS_ASSIGN_OR_RETURN(int axis, NormalizedAxis(ctx, input_axes ? (*input_axes)[k] : 0, rank));
    std::string x = ctx.input(states + k);
    if (axis != 0) {
      x = ctx.Emit("Transpose", {x}, AttrMap{{"perm", MoveAxis(rank, axis, 0)}}, "scan_input_" + std::to_string(k));
    }
    inputs.push_back(x);
    TensorSpec slice{ctx.InputSpec(states + k)->dtype, Shape()};
    for (int d = 0; d < rank; ++d) {
      if (d != axis) slice.shape.AddDim(ctx.InputSpec(states + k)->shape.dim(d));
    }
    specs.push_back(slice);
  }
  StatusOr<OnnxBody> body = ctx.sink().ImportBody(*graph, std::move(specs));
  if (!body.ok()) return body.status().WithPrefix("node '" + ctx.node().name() + "' (Scan) body");
  inputs.insert(inputs.end(), body->captures.begin(), body->captures.end());
  const int n = graph->output_size();
  const size_t scan_outputs = static_cast<size_t>(n) - states;
  if (output_axes && output_axes->size() != scan_outputs) return ctx.Error("one scan_output_axes per scan output");
  AttrMap attrs{{"body", body->graph},
                {"num_states", static_cast<int64_t>(states)},
                {"num_scan_inputs", scans},
                {"num_outputs", int64_t{n}}};
  if (input_directions) attrs.Set("scan_input_directions", *input_directions);
  if (output_directions) attrs.Set("scan_output_directions", *output_directions);
  const std::string node = ctx.Emit("Scan", std::move(inputs), std::move(attrs));
  AddOutputs(node, n, outputs);
  for (size_t k = 0; k < scan_outputs && output_axes; ++k) {
    const int rank = BodySignature(*body).outputs[states + k].shape.rank() + 1;
    LS_ASSIGN_OR_RETURN(int axis, NormalizedAxis(ctx, (*output_axes)[k], rank));
    if (axis == 0) continue;
    std::string& out = (*outputs)[states + k];
    out = ctx.Emit("Transpose", {out}, AttrMap{{"perm", MoveAxis(rank, 0, axis)}}, "scan_output_" + std::to_string(k));
  }
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
