// Control flow: If, Loop and Scan, as ONNX defines them. Each body is a graph held in an
// attribute (attr.h's SubgraphAttr) with one signature whose inputs and outputs are bound by
// position; the session that runs the node compiles each body once (KernelContext::subgraph).
// A body reads nothing of the enclosing graph but its inputs: the importer passes what it uses
// of the outer scope (weights included) as the node's trailing inputs, its "captures".
//
//   If(cond, then captures..., else captures...; then_branch, else_branch, num_outputs): runs
//     one branch on its captures (then_branch takes as many as its signature has inputs) and
//     returns its outputs.
//   Loop(trip_count?, cond?, carried..., captures...; body, has_trip_count, has_condition,
//     num_carried, num_outputs): the body maps (iteration, cond, carried..., captures...) to
//     (cond, carried..., scan slices...); the node returns the last carried values, then each
//     scan output's slices stacked along a new first axis.
//   Scan(states..., scan inputs..., captures...; body, num_states, num_scan_inputs,
//     scan_input_directions, scan_output_directions, num_outputs): the body maps (states...,
//     one slice of each scan input along axis 0...) to (states..., scan slices...), for every
//     position of the scan inputs' first axis (from the end where a direction is 1). The
//     importer moves other scan axes to 0 with Transposes.
//
// Every iteration is one Run of the body's session: a loop allocates per iteration (its
// counters, the body's outputs), unlike a straight-line graph.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/session.h"

namespace lockstep {
namespace {

// Two specs of one value that may differ from run to run (a branch's against the other's, a
// carried value's first against its next): the dims both agree on, -1 for the rest.
StatusOr<TensorSpec> MergeSpecs(std::string_view what, const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype) {
    return InvalidArgument(Str(what) + " is " + Str(DTypeName(a.dtype)) + " in one place and " +
                           Str(DTypeName(b.dtype)) + " in another");
  }
  if (a.shape.rank() != b.shape.rank()) {
    return InvalidArgument(Str(what) + " has shape " + a.shape.ToString() + " in one place and " + b.shape.ToString() +
                           " in another; Lockstep needs one rank");
  }
  TensorSpec merged = a;
  for (int d = 0; d < a.shape.rank(); ++d) {
    if (a.shape[d] != b.shape[d]) merged.shape.set_dim(d, Shape::kUnknownDim);
  }
  return merged;
}

TensorSpec SpecOf(const TensorBinding& b) { return TensorSpec{b.dtype, b.shape}; }

// The body in attr `attr`, checked to take `inputs` inputs and give `outputs` outputs (-1:
// any number).
StatusOr<const Signature*> BodySignature(std::string_view op, const AttrMap& attrs, std::string_view attr,
                                         size_t inputs, int64_t outputs) {
  StatusOr<const Graph*> graph = attrs.GetGraph(attr);
  if (!graph.ok()) return graph.status().WithPrefix(Str(op));
  if ((*graph)->signatures.size() != 1) return InvalidArgument(Str(op) + ": " + Str(attr) + " has no one signature");
  const Signature& sig = (*graph)->signatures[0];
  if (sig.inputs.size() != inputs) {
    return InvalidArgument(Str(op) + ": " + Str(attr) + " takes " + std::to_string(sig.inputs.size()) +
                           " inputs, the node gives it " + std::to_string(inputs));
  }
  if (outputs >= 0 && sig.outputs.size() != static_cast<size_t>(outputs)) {
    return InvalidArgument(Str(op) + ": " + Str(attr) + " gives " + std::to_string(sig.outputs.size()) +
                           " outputs, the node has " + std::to_string(outputs));
  }
  return &sig;
}

StatusOr<int64_t> CountAttr(std::string_view op, const AttrMap& attrs, std::string_view name, int64_t max) {
  LS_ASSIGN_OR_RETURN(int64_t n, attrs.GetInt(name));
  if (n < 0 || n > max) return InvalidArgument(Str(op) + ": " + Str(name) + " " + std::to_string(n) + " out of range");
  return n;
}

// One value: a scalar, or a vector of one (or of a length known at run time).
Status CheckScalar(std::string_view op, std::string_view what, const TensorSpec& spec, DType dtype) {
  const Shape& s = spec.shape;
  if (spec.dtype != dtype || s.rank() > 1 || (s.rank() == 1 && s[0] != 1 && s[0] != Shape::kUnknownDim)) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " must be one " + Str(DTypeName(dtype)) + ", got " +
                           Str(DTypeName(spec.dtype)) + spec.shape.ToString());
  }
  return Status::Ok();
}

// The body's inputs, named as its signature names them, to be filled per run.
std::vector<NamedTensor> BodyInputs(const Session& body) {
  std::vector<NamedTensor> in;
  for (const TensorBinding& b : body.signatures()[0].inputs) in.push_back(NamedTensor{b.key, Tensor()});
  return in;
}

StatusOr<const Session*> Body(std::string_view op, const KernelContext& ctx, std::string_view attr) {
  const Session* body = ctx.subgraph(attr);
  if (body == nullptr) return FailedPrecondition(Str(op) + ": runs only inside a session, which compiles its body");
  return body;
}

// A loop that ran no iteration returns its inputs, which may be the outer session's arena
// buffers: its outputs must not alias them (the memory plan may reuse those), so they are
// copied. A body's outputs are its own already.
Tensor Owned(Tensor t) { return t.read_only() || t.Writable(t.dtype(), t.shape()) ? std::move(t) : t.Clone(); }

Shape OneValueShape(const Shape& declared) { return declared.rank() == 1 ? Shape{1} : Shape{}; }

bool ScalarTrue(const Tensor& t) {
  return t.num_elements() > 0 && *static_cast<const uint8_t*>(t.raw_data()) != 0;
}

// A scan output: `length` of the body's slices, stacked along a new first axis.
StatusOr<TensorSpec> StackedSpec(std::string_view op, const TensorBinding& slice, int64_t length) {
  if (slice.shape.rank() >= Shape::kMaxRank) {
    return InvalidArgument(Str(op) + ": a scan output's slices have rank " + std::to_string(slice.shape.rank()) +
                           ", the most a stack of them can have");
  }
  Shape stacked;
  stacked.AddDim(length);
  for (int64_t d : slice.shape.dims()) stacked.AddDim(d);
  return TensorSpec{slice.dtype, stacked};
}

// Slices of equal shape, stacked along a new first axis (reversed when `reverse`), as output `i`.
Status StackSlices(KernelContext& ctx, int i, std::string_view what, const std::vector<Tensor>& slices,
                   const TensorBinding& declared, bool reverse) {
  Shape shape;
  shape.AddDim(static_cast<int64_t>(slices.size()));
  const DType dtype = slices.empty() ? declared.dtype : slices[0].dtype();
  if (slices.empty()) {
    for (int64_t d : declared.shape.dims()) shape.AddDim(d < 0 ? 0 : d);
  } else {
    for (int64_t d : slices[0].shape().dims()) shape.AddDim(d);
  }
  for (size_t t = 1; t < slices.size(); ++t) {
    if (slices[t].dtype() != dtype || !(slices[t].shape() == slices[0].shape())) {
      return InvalidArgument(Str(what) + " is " + slices[0].shape().ToString() + " at the first iteration and " +
                             slices[t].shape().ToString() + " at iteration " + std::to_string(t));
    }
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(i, dtype, shape));
  const size_t n = slices.size();
  for (size_t t = 0; t < n; ++t) {
    const Tensor& slice = slices[reverse ? n - 1 - t : t];
    if (dtype == DType::kString) {
      auto src = slice.data<std::string>();
      auto dst = out->mutable_data<std::string>().subspan(t * src.size(), src.size());
      for (size_t e = 0; e < src.size(); ++e) dst[e] = src[e];
    } else if (slice.byte_size() > 0) {
      std::memcpy(static_cast<char*>(out->mutable_raw_data()) + t * slice.byte_size(), slice.raw_data(),
                  slice.byte_size());
    }
  }
  return Status::Ok();
}

// Scan outputs are held until the loop ends; a body that never stops growing them fails the
// request instead of taking the machine's memory.
Status CheckAccumulated(std::string_view op, size_t& bytes, const Tensor& slice) {
  bytes += slice.dtype() == DType::kString ? static_cast<size_t>(slice.num_elements()) * 32 : slice.byte_size();
  if (bytes > kDefaultMaxTensorBytes) {
    return ResourceExhausted(Str(op) + ": the scan outputs outgrew " + std::to_string(kDefaultMaxTensorBytes) + " bytes");
  }
  return Status::Ok();
}

// ---- If ----

// How many of the node's `captures` are then_branch's (the first ones).
StatusOr<size_t> ThenInputs(const AttrMap& attrs, size_t captures) {
  StatusOr<const Graph*> graph = attrs.GetGraph("then_branch");
  if (!graph.ok()) return graph.status().WithPrefix("If");
  const size_t n = (*graph)->signatures.empty() ? 0 : (*graph)->signatures[0].inputs.size();
  if (n > captures) return InvalidArgument("If: then_branch takes more inputs than the node gives both branches");
  return n;
}

StatusOr<std::vector<TensorSpec>> InferIf(const ShapeInferenceContext& ctx) {
  if (ctx.inputs.empty()) return InvalidArgument("If: expects a condition");
  LS_RETURN_IF_ERROR(CheckScalar("If", "cond", ctx.inputs[0], DType::kBool));
  LS_ASSIGN_OR_RETURN(int64_t n, CountAttr("If", ctx.attrs, "num_outputs", 1 << 20));
  const size_t captures = ctx.inputs.size() - 1;
  LS_ASSIGN_OR_RETURN(const size_t then_inputs, ThenInputs(ctx.attrs, captures));
  LS_ASSIGN_OR_RETURN(const Signature* then_sig, BodySignature("If", ctx.attrs, "then_branch", then_inputs, n));
  LS_ASSIGN_OR_RETURN(const Signature* else_sig,
                      BodySignature("If", ctx.attrs, "else_branch", captures - then_inputs, n));
  std::vector<TensorSpec> out;
  for (size_t k = 0; k < static_cast<size_t>(n); ++k) {
    LS_ASSIGN_OR_RETURN(TensorSpec spec, MergeSpecs("If: output " + std::to_string(k),
                                                    SpecOf(then_sig->outputs[k]), SpecOf(else_sig->outputs[k])));
    out.push_back(std::move(spec));
  }
  return out;
}

Status IfKernel(KernelContext& ctx) {
  if (ctx.input(0).num_elements() != 1) return InvalidArgument("If: cond is one value, got " + ctx.input(0).shape().ToString());
  const bool cond = ScalarTrue(ctx.input(0));
  LS_ASSIGN_OR_RETURN(const Session* body, Body("If", ctx, cond ? "then_branch" : "else_branch"));
  LS_ASSIGN_OR_RETURN(const size_t then_inputs, ThenInputs(ctx.attrs(), static_cast<size_t>(ctx.num_inputs()) - 1));
  const size_t first = 1 + (cond ? 0 : then_inputs);
  std::vector<NamedTensor> in = BodyInputs(*body);
  for (size_t k = 0; k < in.size(); ++k) in[k].tensor = ctx.input(static_cast<int>(first + k));
  std::vector<NamedTensor> out;
  LS_RETURN_IF_ERROR(body->Run(body->signatures()[0].name, in, &out));
  for (size_t k = 0; k < out.size(); ++k) ctx.SetOutput(static_cast<int>(k), std::move(out[k].tensor));
  return Status::Ok();
}

// ---- Loop ----

struct LoopLayout {
  bool has_trip_count = false;
  bool has_condition = false;
  size_t carried = 0;
  size_t first_carried = 0;  // node input of the first carried value
  size_t scans = 0;
};

StatusOr<LoopLayout> ReadLoopLayout(const AttrMap& attrs, size_t num_inputs) {
  LoopLayout l;
  LS_ASSIGN_OR_RETURN(l.has_trip_count, attrs.GetBoolOr("has_trip_count", false));
  LS_ASSIGN_OR_RETURN(l.has_condition, attrs.GetBoolOr("has_condition", false));
  LS_ASSIGN_OR_RETURN(int64_t carried, CountAttr("Loop", attrs, "num_carried", 1 << 20));
  LS_ASSIGN_OR_RETURN(int64_t outputs, CountAttr("Loop", attrs, "num_outputs", 1 << 20));
  l.carried = static_cast<size_t>(carried);
  l.first_carried = (l.has_trip_count ? 1 : 0) + (l.has_condition ? 1 : 0);
  if (outputs < carried || l.first_carried + l.carried > num_inputs) {
    return InvalidArgument("Loop: " + std::to_string(num_inputs) + " inputs and " + std::to_string(outputs) +
                           " outputs do not fit " + std::to_string(carried) + " carried values");
  }
  l.scans = static_cast<size_t>(outputs - carried);
  return l;
}

StatusOr<std::vector<TensorSpec>> InferLoop(const ShapeInferenceContext& ctx) {
  LS_ASSIGN_OR_RETURN(LoopLayout l, ReadLoopLayout(ctx.attrs, ctx.inputs.size()));
  if (l.has_trip_count) LS_RETURN_IF_ERROR(CheckScalar("Loop", "the trip count", ctx.inputs[0], DType::kInt64));
  if (l.has_condition) {
    LS_RETURN_IF_ERROR(CheckScalar("Loop", "the condition", ctx.inputs[l.has_trip_count ? 1 : 0], DType::kBool));
  }
  const size_t captures = ctx.inputs.size() - l.first_carried - l.carried;
  LS_ASSIGN_OR_RETURN(const Signature* sig,
                      BodySignature("Loop", ctx.attrs, "body", 2 + l.carried + captures,
                                    static_cast<int64_t>(1 + l.carried + l.scans)));
  LS_RETURN_IF_ERROR(CheckScalar("Loop", "the body's iteration number", SpecOf(sig->inputs[0]), DType::kInt64));
  LS_RETURN_IF_ERROR(CheckScalar("Loop", "the body's condition", SpecOf(sig->inputs[1]), DType::kBool));
  LS_RETURN_IF_ERROR(CheckScalar("Loop", "the body's output condition", SpecOf(sig->outputs[0]), DType::kBool));
  std::vector<TensorSpec> out;
  for (size_t k = 0; k < l.carried; ++k) {
    const std::string what = "Loop: carried value " + std::to_string(k);
    LS_ASSIGN_OR_RETURN(TensorSpec first, MergeSpecs(what, ctx.inputs[l.first_carried + k], SpecOf(sig->inputs[2 + k])));
    LS_ASSIGN_OR_RETURN(TensorSpec next, MergeSpecs(what, first, SpecOf(sig->outputs[1 + k])));
    out.push_back(std::move(next));
  }
  for (size_t k = 0; k < l.scans; ++k) {
    LS_ASSIGN_OR_RETURN(TensorSpec stacked, StackedSpec("Loop", sig->outputs[1 + l.carried + k], Shape::kUnknownDim));
    out.push_back(std::move(stacked));
  }
  return out;
}

Status LoopKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(LoopLayout l, ReadLoopLayout(ctx.attrs(), static_cast<size_t>(ctx.num_inputs())));
  LS_ASSIGN_OR_RETURN(const Session* body, Body("Loop", ctx, "body"));
  for (size_t k = 0; k < l.first_carried; ++k) {
    if (ctx.input(static_cast<int>(k)).num_elements() != 1) {
      return InvalidArgument("Loop: the trip count and the condition are one value each, got " +
                             ctx.input(static_cast<int>(k)).shape().ToString());
    }
  }
  const int64_t trips =
      l.has_trip_count ? ctx.input(0).data<int64_t>()[0] : std::numeric_limits<int64_t>::max();
  bool cond = !l.has_condition || ScalarTrue(ctx.input(l.has_trip_count ? 1 : 0));
  std::vector<NamedTensor> in = BodyInputs(*body);
  for (size_t k = 0; k < in.size() - 2; ++k) in[2 + k].tensor = ctx.input(static_cast<int>(l.first_carried + k));
  std::vector<std::vector<Tensor>> slices(l.scans);
  size_t accumulated = 0;
  const std::string& signature = body->signatures()[0].name;
  // A scalar, or a vector of one where the body declares it so.
  const Shape iteration_shape = OneValueShape(body->signatures()[0].inputs[0].shape);
  const Shape cond_shape = OneValueShape(body->signatures()[0].inputs[1].shape);
  for (int64_t i = 0; i < trips && cond; ++i) {
    in[0].tensor = Tensor::Scalar<int64_t>(i).Reshaped(iteration_shape);
    in[1].tensor = Tensor::Scalar<bool>(cond).Reshaped(cond_shape);
    std::vector<NamedTensor> out;
    Status status = body->Run(signature, in, &out);
    if (!status.ok()) return status.WithPrefix("iteration " + std::to_string(i));
    // Without a condition input ONNX ignores the body's: the loop runs for the trip count.
    if (l.has_condition) cond = ScalarTrue(out[0].tensor);
    for (size_t k = 0; k < l.carried; ++k) in[2 + k].tensor = std::move(out[1 + k].tensor);
    for (size_t k = 0; k < l.scans; ++k) {
      LS_RETURN_IF_ERROR(CheckAccumulated("Loop", accumulated, out[1 + l.carried + k].tensor));
      slices[k].push_back(std::move(out[1 + l.carried + k].tensor));
    }
  }
  for (size_t k = 0; k < l.carried; ++k) ctx.SetOutput(static_cast<int>(k), Owned(std::move(in[2 + k].tensor)));
  const Signature& sig = body->signatures()[0];
  for (size_t k = 0; k < l.scans; ++k) {
    LS_RETURN_IF_ERROR(StackSlices(ctx, static_cast<int>(l.carried + k), "Loop: scan output " + std::to_string(k),
                                   slices[k], sig.outputs[1 + l.carried + k], false));
  }
  return Status::Ok();
}

// ---- Scan ----

struct ScanLayout {
  size_t states = 0;
  size_t scan_inputs = 0;
  size_t scan_outputs = 0;
  std::span<const int64_t> input_directions;   // empty: all forward
  std::span<const int64_t> output_directions;  // empty: all forward
};

StatusOr<ScanLayout> ReadScanLayout(const AttrMap& attrs, size_t num_inputs) {
  ScanLayout l;
  LS_ASSIGN_OR_RETURN(int64_t states, CountAttr("Scan", attrs, "num_states", 1 << 20));
  LS_ASSIGN_OR_RETURN(int64_t scans, CountAttr("Scan", attrs, "num_scan_inputs", 1 << 20));
  LS_ASSIGN_OR_RETURN(int64_t outputs, CountAttr("Scan", attrs, "num_outputs", 1 << 20));
  if (scans < 1 || static_cast<size_t>(states + scans) > num_inputs || outputs < states) {
    return InvalidArgument("Scan: " + std::to_string(num_inputs) + " inputs and " + std::to_string(outputs) +
                           " outputs do not fit " + std::to_string(states) + " states and " + std::to_string(scans) +
                           " scan inputs");
  }
  l.states = static_cast<size_t>(states);
  l.scan_inputs = static_cast<size_t>(scans);
  l.scan_outputs = static_cast<size_t>(outputs - states);
  if (attrs.Has("scan_input_directions")) {
    LS_ASSIGN_OR_RETURN(l.input_directions, attrs.GetInts("scan_input_directions"));
  }
  if (attrs.Has("scan_output_directions")) {
    LS_ASSIGN_OR_RETURN(l.output_directions, attrs.GetInts("scan_output_directions"));
  }
  if ((!l.input_directions.empty() && l.input_directions.size() != l.scan_inputs) ||
      (!l.output_directions.empty() && l.output_directions.size() != l.scan_outputs)) {
    return InvalidArgument("Scan: one direction per scan input and per scan output");
  }
  return l;
}

bool Reversed(std::span<const int64_t> directions, size_t k) { return !directions.empty() && directions[k] != 0; }

StatusOr<std::vector<TensorSpec>> InferScan(const ShapeInferenceContext& ctx) {
  LS_ASSIGN_OR_RETURN(ScanLayout l, ReadScanLayout(ctx.attrs, ctx.inputs.size()));
  LS_ASSIGN_OR_RETURN(const Signature* sig, BodySignature("Scan", ctx.attrs, "body", ctx.inputs.size(),
                                                          static_cast<int64_t>(l.states + l.scan_outputs)));
  int64_t length = Shape::kUnknownDim;
  for (size_t k = 0; k < l.scan_inputs; ++k) {
    const Shape& s = ctx.inputs[l.states + k].shape;
    if (s.rank() == 0) return InvalidArgument("Scan: scan input " + std::to_string(k) + " is a scalar");
    if (!MergeDim(length, s[0], &length)) {
      return InvalidArgument("Scan: the scan inputs' first dimensions differ (" + std::to_string(length) + " and " +
                             std::to_string(s[0]) + ")");
    }
  }
  std::vector<TensorSpec> out;
  for (size_t k = 0; k < l.states; ++k) {
    const std::string what = "Scan: state " + std::to_string(k);
    LS_ASSIGN_OR_RETURN(TensorSpec first, MergeSpecs(what, ctx.inputs[k], SpecOf(sig->inputs[k])));
    LS_ASSIGN_OR_RETURN(TensorSpec next, MergeSpecs(what, first, SpecOf(sig->outputs[k])));
    out.push_back(std::move(next));
  }
  for (size_t k = 0; k < l.scan_outputs; ++k) {
    LS_ASSIGN_OR_RETURN(TensorSpec stacked, StackedSpec("Scan", sig->outputs[l.states + k], length));
    out.push_back(std::move(stacked));
  }
  return out;
}

Status ScanKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(ScanLayout l, ReadScanLayout(ctx.attrs(), static_cast<size_t>(ctx.num_inputs())));
  LS_ASSIGN_OR_RETURN(const Session* body, Body("Scan", ctx, "body"));
  const int64_t length = ctx.input(static_cast<int>(l.states)).shape().rank() > 0
                             ? ctx.input(static_cast<int>(l.states)).shape()[0] : 0;
  std::vector<NamedTensor> in = BodyInputs(*body);
  for (size_t k = 0; k < in.size(); ++k) in[k].tensor = ctx.input(static_cast<int>(k));
  for (size_t k = 0; k < l.scan_inputs; ++k) {
    const Tensor& x = ctx.input(static_cast<int>(l.states + k));
    if (x.shape().rank() == 0 || x.shape()[0] != length) {
      return InvalidArgument("Scan: scan input " + std::to_string(k) + " has " + std::to_string(x.shape()[0]) +
                             " positions, the first has " + std::to_string(length));
    }
  }
  std::vector<std::vector<Tensor>> slices(l.scan_outputs);
  size_t accumulated = 0;
  const Signature& sig = body->signatures()[0];
  for (int64_t t = 0; t < length; ++t) {
    for (size_t k = 0; k < l.scan_inputs; ++k) {
      const Tensor& x = ctx.input(static_cast<int>(l.states + k));
      const int64_t at = Reversed(l.input_directions, k) ? length - 1 - t : t;
      Shape slice_shape;
      for (int d = 1; d < x.shape().rank(); ++d) slice_shape.AddDim(x.shape()[d]);
      in[l.states + k].tensor = x.Rows(at, 1).Reshaped(slice_shape);
    }
    std::vector<NamedTensor> out;
    Status status = body->Run(sig.name, in, &out);
    if (!status.ok()) return status.WithPrefix("position " + std::to_string(t));
    for (size_t k = 0; k < l.states; ++k) in[k].tensor = std::move(out[k].tensor);
    for (size_t k = 0; k < l.scan_outputs; ++k) {
      LS_RETURN_IF_ERROR(CheckAccumulated("Scan", accumulated, out[l.states + k].tensor));
      slices[k].push_back(std::move(out[l.states + k].tensor));
    }
  }
  for (size_t k = 0; k < l.states; ++k) ctx.SetOutput(static_cast<int>(k), Owned(std::move(in[k].tensor)));
  for (size_t k = 0; k < l.scan_outputs; ++k) {
    LS_RETURN_IF_ERROR(StackSlices(ctx, static_cast<int>(l.states + k), "Scan: scan output " + std::to_string(k),
                                   slices[k], sig.outputs[l.states + k], Reversed(l.output_directions, k)));
  }
  return Status::Ok();
}

OpDef ControlFlowOpDef(std::string name, int min_inputs, ShapeFn infer, KernelFn compute) {
  OpDef def;
  def.name = std::move(name);
  def.min_inputs = min_inputs;
  def.max_inputs = -1;
  def.num_outputs = -1;
  def.infer = infer;
  def.compute = compute;
  // Folding would run the kernel outside a session, which compiles the bodies.
  def.deterministic = false;
  return def;
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& registry) {
  (void)registry.Register(ControlFlowOpDef("If", 1, InferIf, IfKernel));
  (void)registry.Register(ControlFlowOpDef("Loop", 0, InferLoop, LoopKernel));
  (void)registry.Register(ControlFlowOpDef("Scan", 1, InferScan, ScanKernel));
}

}  // namespace lockstep
