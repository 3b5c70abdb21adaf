#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/graph_analysis.h"
#include "runtime/matmul/packed_b.h"
#include "runtime/op_registry.h"
#include "runtime/passes/memory_plan.h"
#include "runtime/passes/passes.h"
#include "runtime/sessions_per_input.h"
#include "runtime/signature_inputs.h"

namespace lockstep {
namespace {

// One kernel call in a compiled plan.
struct Step {
  const OpDef* op = nullptr;
  const NodeDef* node = nullptr;
  int input_offset = 0;  // into Plan::step_inputs (and Plan::step_packed, when has_packed)
  int num_inputs = 0;
  bool has_packed = false;
  int first_output = 0;  // value id; a node's outputs are consecutive values
  int num_outputs = 0;
  std::span<const CompiledSubgraph> subgraphs;  // a control-flow node's bodies
};

// The bodies of the control-flow nodes, compiled once with the session (by node).
using CompiledBodies = std::map<const NodeDef*, std::vector<CompiledSubgraph>>;

// Storage that grows to the largest size ever asked of it and is then reused.
struct ArenaBuffer {
  std::shared_ptr<void> storage;
  size_t capacity = 0;

  void* Ensure(size_t bytes) {
    if (bytes > capacity) {
      size_t grown = std::max(bytes, capacity + capacity / 2);
      storage = AllocateAligned(grown);
      capacity = grown;
    }
    return storage.get();
  }
};

// Everything one Run needs that it may write; owned by one call at a time.
struct RunScratch {
  std::vector<Tensor> values;
  std::vector<const Tensor*> step_inputs;  // pointers into `values`, laid out as Plan::step_inputs
  std::vector<ArenaBuffer> buffers;
  std::vector<const PackedB*> step_packed;  // Plan::step_packed with the caller's packings in
};

// A product whose packed operand is a signature input the caller packs (packed_by_caller).
struct PackSiteInfo {
  std::string input;  // the signature input's key
  int step = 0;       // into Plan::steps
  int input_index = 0;
};

struct Plan {
  Signature signature;
  std::vector<Step> steps;
  std::vector<int> step_inputs;  // value ids
  // Parallel to step_inputs: the packed form of a constant input, or null. The packed
  // matrices belong to the session (PackedWeights), shared by all its plans.
  std::vector<const PackedB*> step_packed;
  std::vector<PackSiteInfo> pack_sites;
  int num_values = 0;
  std::vector<std::pair<int, Tensor>> constants;
  std::vector<int> input_values;   // per signature input
  // Per signature input: the shape a request must match, the binding's shape tightened by
  // the Input node's own (a binding may say [-1] where the node says [3]).
  std::vector<Shape> input_patterns;
  std::vector<int> output_values;  // per signature output
  // Per value: the first signature output it is, or -1.
  std::vector<int> output_slot_of_value;
  MemoryPlan memory;

  mutable std::mutex scratch_mu;
  mutable std::vector<std::unique_ptr<RunScratch>> free_scratch;

  std::unique_ptr<RunScratch> TakeScratch() const;
  void ReturnScratch(std::unique_ptr<RunScratch> scratch) const;
};

std::unique_ptr<RunScratch> Plan::TakeScratch() const {
  {
    std::lock_guard<std::mutex> lock(scratch_mu);
    if (!free_scratch.empty()) {
      auto s = std::move(free_scratch.back());
      free_scratch.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<RunScratch>();
  s->values.resize(num_values);
  for (const auto& [v, t] : constants) s->values[v] = t;
  s->step_inputs.reserve(step_inputs.size());
  for (int v : step_inputs) s->step_inputs.push_back(&s->values[v]);
  s->buffers.resize(memory.num_buffers);
  return s;
}

void Plan::ReturnScratch(std::unique_ptr<RunScratch> scratch) const {
  std::lock_guard<std::mutex> lock(scratch_mu);
  free_scratch.push_back(std::move(scratch));
}

// Hands kernels their output storage: an arena buffer where the memory plan has one.
class ArenaAllocator final : public OutputAllocator {
 public:
  // `caller_outputs`: the tensors the caller's output vector held from its last Run. A value
  // that is a signature output is computed straight into the caller's tensor when that has its
  // dtype and shape and nothing else holds it, saving the copy out at the end.
  ArenaAllocator(const Plan& plan, RunScratch& scratch, size_t budget, std::vector<NamedTensor>& caller_outputs)
      : plan_(plan), scratch_(scratch), budget_(budget), remaining_(budget), caller_outputs_(caller_outputs) {}
  void set_step(const Step* step) { step_ = step; }

  StatusOr<Tensor> Allocate(int index, DType dtype, const Shape& shape, size_t bytes) override {
    if (bytes > remaining_) {
      return ResourceExhausted("this request needs more than the " + std::to_string(budget_) +
                               " bytes one run may use (an output of shape " + shape.ToString() + ")");
    }
    remaining_ -= bytes;
    const int value = step_->first_output + index;
    const int slot = plan_.output_slot_of_value[static_cast<size_t>(value)];
    if (slot >= 0 && static_cast<size_t>(slot) < caller_outputs_.size()) {
      NamedTensor& out = caller_outputs_[static_cast<size_t>(slot)];
      if (out.name == plan_.signature.outputs[static_cast<size_t>(slot)].key && out.tensor.Writable(dtype, shape)) {
        return out.tensor;
      }
    }
    int buffer = plan_.memory.buffer_of_value[value];
    if (buffer < 0 || dtype == DType::kString) return Tensor(dtype, shape);
    return Tensor::MutableView(dtype, shape, scratch_.buffers[buffer].Ensure(bytes), nullptr);
  }

 private:
  const Plan& plan_;
  RunScratch& scratch_;
  const size_t budget_;
  size_t remaining_;
  const Step* step_ = nullptr;
  std::vector<NamedTensor>& caller_outputs_;
};

std::string StepLabel(const Step& s) { return "node '" + s.node->name + "' (" + s.op->name + ")"; }

// Constant inputs (Const and Variable values) packed for the matmul core, by (consumer node,
// input index): each weight is packed once per session, however many signatures use it.
using PackedWeights = std::map<std::pair<int, int>, std::shared_ptr<const PackedB>>;

// Packs the constant inputs of node `i` that its op packs, into `packed` (parallel to its
// inputs). Returns whether any was.
StatusOr<bool> PackConstantInputs(const Model& model, const GraphAnalysis& a, int i, ThreadPool& pool,
                                  PackedWeights& cache, std::vector<const PackedB*>& packed) {
  const OpDef* op = a.ops[i];
  bool any = false;
  for (size_t j = 0; j < a.inputs[i].size(); ++j) {
    const PackedB* p = nullptr;
    const int producer = a.inputs[i][j].node;
    // A session's Variables are as constant as its Consts (constant folding folds both).
    const std::string& producer_op = a.ops[producer]->name;
    if (op->pack_constant != nullptr && (producer_op == kConstOp || producer_op == kVariableOp)) {
      auto key = std::make_pair(i, static_cast<int>(j));
      auto it = cache.find(key);
      if (it == cache.end()) {
        const auto& weight_name =
            std::get<std::string>(model.graph.nodes[producer].attrs.values().at("weight"));
        LS_ASSIGN_OR_RETURN(std::shared_ptr<const PackedB> made,
                            op->pack_constant(model.graph.nodes[i].attrs, static_cast<int>(j),
                                              model.weights.at(weight_name), &pool));
        it = cache.emplace(key, std::move(made)).first;
      }
      p = it->second.get();
    }
    any = any || p != nullptr;
    packed.push_back(p);
  }
  return any;
}

// Builds the plan for one signature: only the nodes its outputs need, in topological order.
StatusOr<std::unique_ptr<Plan>> BuildPlan(const Model& model, const GraphAnalysis& a,
                                          const Signature& sig, bool reuse_buffers,
                                          const std::vector<std::string>& packed_by_caller,
                                          ThreadPool& pool, PackedWeights& packed, const CompiledBodies& bodies) {
  auto plan = std::make_unique<Plan>();
  plan->signature = sig;
  const auto& nodes = model.graph.nodes;
  const int n = static_cast<int>(nodes.size());

  std::vector<bool> needed(n, false);
  std::vector<int> stack;
  auto need = [&](ValueId v) {
    if (!needed[v.node]) {
      needed[v.node] = true;
      stack.push_back(v.node);
    }
  };
  std::vector<ValueId> outputs, inputs;
  for (const TensorBinding& b : sig.outputs) {
    LS_ASSIGN_OR_RETURN(ValueId v, a.Resolve(b.tensor));
    outputs.push_back(v);
    need(v);
  }
  for (const TensorBinding& b : sig.inputs) {
    LS_ASSIGN_OR_RETURN(ValueId v, a.Resolve(b.tensor));
    inputs.push_back(v);
    need(v);
    Shape pattern = b.shape;
    const Shape& declared = a.Spec(v).shape;
    for (int d = 0; d < pattern.rank(); ++d) {
      if (pattern[d] < 0) pattern.set_dim(d, declared[d]);
    }
    plan->input_patterns.push_back(pattern);
  }
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    for (ValueId v : a.inputs[i]) need(v);
  }

  std::vector<int> first_value(n, -1);
  for (int i : a.topological_order) {
    if (!needed[i]) continue;
    first_value[i] = plan->num_values;
    plan->num_values += static_cast<int>(a.outputs[i].size());
  }
  auto value_of = [&](ValueId v) { return first_value[v.node] + v.output; };

  MemoryPlanProblem problem;
  problem.num_values = plan->num_values;
  problem.external.assign(plan->num_values, false);
  for (int i : a.topological_order) {
    if (!needed[i]) continue;
    const OpDef* op = a.ops[i];
    const NodeDef& node = nodes[i];
    if (op->name == kConstOp || op->name == kVariableOp) {
      auto weight = model.weights.find(std::get<std::string>(node.attrs.values().at("weight")));
      plan->constants.emplace_back(first_value[i], weight->second);
      problem.external[first_value[i]] = true;
      continue;
    }
    if (op->name == kInputOp) {
      problem.external[first_value[i]] = true;
      continue;
    }
    Step step;
    step.op = op;
    step.node = &node;
    step.input_offset = static_cast<int>(plan->step_inputs.size());
    step.num_inputs = static_cast<int>(a.inputs[i].size());
    step.first_output = first_value[i];
    step.num_outputs = static_cast<int>(a.outputs[i].size());
    if (auto it = bodies.find(&node); it != bodies.end()) step.subgraphs = it->second;
    std::vector<const PackedB*> step_packed;
    LS_ASSIGN_OR_RETURN(step.has_packed, PackConstantInputs(model, a, i, pool, packed, step_packed));
    step_packed.resize(a.inputs[i].size());
    for (size_t j = 0; j < a.inputs[i].size() && op->repack_input != nullptr; ++j) {
      if (static_cast<int>(j) != op->repacked_input || step_packed[j] != nullptr) continue;
      for (size_t k = 0; k < inputs.size(); ++k) {
        if (inputs[k] != a.inputs[i][j] || std::find(packed_by_caller.begin(), packed_by_caller.end(),
                                                      sig.inputs[k].key) == packed_by_caller.end()) {
          continue;
        }
        plan->pack_sites.push_back({sig.inputs[k].key, static_cast<int>(plan->steps.size()), static_cast<int>(j)});
        step.has_packed = true;
      }
    }
    plan->step_packed.insert(plan->step_packed.end(), step_packed.begin(), step_packed.end());
    MemoryPlanStep mp;
    mp.aliases_input = op->aliases_input;
    for (ValueId v : a.inputs[i]) {
      plan->step_inputs.push_back(value_of(v));
      mp.inputs.push_back(value_of(v));
    }
    for (int k = 0; k < step.num_outputs; ++k) mp.outputs.push_back(step.first_output + k);
    plan->steps.push_back(step);
    problem.steps.push_back(std::move(mp));
  }
  for (ValueId v : inputs) plan->input_values.push_back(value_of(v));
  plan->output_slot_of_value.assign(static_cast<size_t>(plan->num_values), -1);
  for (ValueId v : outputs) {
    const int value = value_of(v);
    int& slot = plan->output_slot_of_value[static_cast<size_t>(value)];
    if (slot < 0) slot = static_cast<int>(plan->output_values.size());
    plan->output_values.push_back(value);
    problem.live_to_end.push_back(value);
  }
  plan->memory = PlanMemory(problem, reuse_buffers);
  return plan;
}

// MatchInputs against the plan's signature, placing the inputs in the plan's input values
// when `values` is given.
Status BindInputs(const Plan& plan, std::span<const NamedTensor> inputs, std::vector<Tensor>* values) {
  return MatchInputs(plan.signature, plan.input_patterns, inputs, [&](size_t k, const Tensor& t) {
    if (values != nullptr) (*values)[plan.input_values[k]] = t;
  });
}

// The inputs of a run of a model made per input, in its signature's order, checked, into
// `ordered` (its capacity kept from run to run).
Status OrderedInputs(const Model& model, std::string_view signature, std::span<const NamedTensor> inputs,
                     std::vector<const Tensor*>* ordered) {
  const Signature* sig = model.graph.FindSignature(signature);
  if (sig == nullptr) return NotFound("no signature named '" + std::string(signature) + "'");
  ordered->assign(sig->inputs.size(), nullptr);
  return MatchInputs(*sig, {}, inputs, [&](size_t k, const Tensor& t) { (*ordered)[k] = &t; });
}

}  // namespace

struct Session::Compiled {
  Model model;
  PackedWeights packed;
  ThreadPool* pool = nullptr;
  size_t max_bytes_per_run = 0;
  BatchGroup* batch_group = nullptr;
  std::vector<std::unique_ptr<Plan>> plans;  // parallel to model.graph.signatures
  std::vector<std::unique_ptr<Session>> body_sessions;
  CompiledBodies bodies;  // views of body_sessions
  std::unique_ptr<SessionsPerInput> per_input;  // for a model made per input: no plans of its own

  const Plan* Find(std::string_view name) const {
    for (const auto& p : plans) {
      if (p->signature.name == name) return p.get();
    }
    return nullptr;
  }
};

namespace {

// SessionOptions::release_packed_weights. A constant's data is needed if some step reads it
// unpacked or a signature returns it; the rest of the fixed-size weights are read only through
// their packed form, so their data goes, dtype and shape staying for the kernels' checks.
// Weights still needed that view a shared image (a bundle's weights, file_image.h) are then
// copied out when they are small beside what went, so that nothing holds the image and it is
// freed: a served version holds its matrices once, packed, instead of twice.
//
// Weights may share storage (constant folding reshapes a Const in place; a bundle may give two
// entries one offset), so data is needed by address, and each tensor is replaced by one of its
// own dtype and shape: the plans' constants are copies of the weights, found by all three.
void ReleasePackedWeights(Session::Compiled& c) {
  using Key = std::pair<const void*, std::string>;
  const auto key = [](const Tensor& t) {
    return Key(t.raw_data(), std::string(DTypeName(t.dtype())) + t.shape().ToString());
  };
  const auto fixed_size = [](const Tensor& t) { return t.dtype() != DType::kString && t.byte_size() > 0; };
  std::map<const void*, bool> data_needed;  // by the constant's data
  for (const auto& plan : c.plans) {
    std::map<int, const void*> data_of_value;
    for (const auto& [value, t] : plan->constants) {
      if (!fixed_size(t)) continue;
      data_of_value[value] = t.raw_data();
      data_needed.try_emplace(t.raw_data(), false);
    }
    const auto needed = [&](int value) {
      if (auto it = data_of_value.find(value); it != data_of_value.end()) data_needed[it->second] = true;
    };
    for (const Step& step : plan->steps) {
      for (int j = 0; j < step.num_inputs; ++j) {
        const size_t at = static_cast<size_t>(step.input_offset + j);
        if (plan->step_packed[at] == nullptr) needed(plan->step_inputs[at]);
      }
    }
    for (int value : plan->output_values) needed(value);
  }

  std::map<Key, Tensor> replacement;
  size_t released = 0;
  size_t kept_views = 0;
  for (const auto& [name, t] : c.model.weights) {
    if (!fixed_size(t)) continue;
    const auto it = data_needed.find(t.raw_data());
    if (it != data_needed.end() && !it->second) {
      if (replacement.emplace(key(t), Tensor::View(t.dtype(), t.shape(), nullptr, nullptr)).second) {
        released += t.byte_size();
      }
    } else if (t.read_only()) {
      kept_views += t.byte_size();
    }
  }
  if (released == 0) return;
  if (kept_views <= released / 8) {
    for (const auto& [name, t] : c.model.weights) {
      if (t.dtype() == DType::kString || !t.read_only() || replacement.count(key(t)) > 0) continue;
      if (t.byte_size() == 0) {  // an empty view still holds its image
        replacement.emplace(key(t), Tensor::View(t.dtype(), t.shape(), nullptr, nullptr));
        continue;
      }
      // Still read-only: a kernel writing into a weight is a bug to catch, as it was in the image.
      auto copy = std::make_shared<const Tensor>(t.Clone());
      replacement.emplace(key(t), Tensor::View(t.dtype(), t.shape(), copy->raw_data(), copy));
    }
  }
  const auto replace = [&](Tensor& t) {
    if (t.dtype() == DType::kString) return;
    if (auto it = replacement.find(key(t)); it != replacement.end()) t = it->second;
  };
  for (auto& [name, t] : c.model.weights) replace(t);
  for (auto& plan : c.plans) {
    for (auto& [value, t] : plan->constants) replace(t);
  }
}

// Compiles the body of every control-flow node (each attr holding a graph) with the options
// of the session that runs it, so that a load error in a body is the model's load error.
Status CompileBodies(Session::Compiled& c, const SessionOptions& options) {
  SessionOptions body_options = options;
  body_options.packed_by_caller.clear();
  body_options.release_packed_weights = false;
  for (const NodeDef& node : c.model.graph.nodes) {
    for (const auto& [attr, value] : node.attrs.values()) {
      const auto* graph = std::get_if<SubgraphAttr>(&value);
      if (graph == nullptr) continue;
      const std::string where = "node '" + node.name + "' (" + node.op + ") attr '" + attr + "'";
      if (*graph == nullptr) return InvalidArgument(where + " holds no graph");
      if ((*graph)->signatures.size() != 1) return InvalidArgument(where + ": a body has exactly one signature");
      StatusOr<std::unique_ptr<Session>> body = Session::Create(Model{**graph, {}, nullptr}, body_options);
      if (!body.ok()) return body.status().WithPrefix(where);
      c.bodies[&node].push_back(CompiledSubgraph{attr, body->get()});
      c.body_sessions.push_back(std::move(*body));
    }
  }
  return Status::Ok();
}

}  // namespace

Session::Session(Key, std::unique_ptr<Compiled> compiled) : compiled_(std::move(compiled)) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Create(Model model, const SessionOptions& options) {
  auto compiled = std::make_unique<Compiled>();
  compiled->pool = options.pool != nullptr ? options.pool : &ThreadPool::Default();
  compiled->max_bytes_per_run = options.max_bytes_per_run;
  compiled->batch_group = options.batch_group;
  if (model.per_input != nullptr) {
    compiled->per_input = std::make_unique<SessionsPerInput>(model.per_input, options);
    compiled->model = std::move(model);
    return std::make_unique<Session>(Key{}, std::move(compiled));
  }
  LS_RETURN_IF_ERROR(AnalyzeGraph(model).status());
  if (options.optimize) LS_RETURN_IF_ERROR(OptimizeGraph(model, *compiled->pool));
  if (options.bf16_products) LS_RETURN_IF_ERROR(UseBf16Products(model));
  compiled->model = std::move(model);
  LS_ASSIGN_OR_RETURN(GraphAnalysis analysis, AnalyzeGraph(compiled->model));
  LS_RETURN_IF_ERROR(CompileBodies(*compiled, options));
  for (const Signature& sig : compiled->model.graph.signatures) {
    LS_ASSIGN_OR_RETURN(auto plan, BuildPlan(compiled->model, analysis, sig, options.reuse_buffers,
                                             options.packed_by_caller, *compiled->pool, compiled->packed,
                                             compiled->bodies));
    compiled->plans.push_back(std::move(plan));
  }
  if (options.release_packed_weights) ReleasePackedWeights(*compiled);
  return std::make_unique<Session>(Key{}, std::move(compiled));
}

Status Session::Run(std::string_view signature, std::span<const NamedTensor> inputs,
                    std::vector<NamedTensor>* outputs) const {
  return Run(signature, inputs, outputs, {});
}

Status Session::Run(std::string_view signature, std::span<const NamedTensor> inputs, std::vector<NamedTensor>* outputs,
                    std::span<const PackedB* const> site_packs) const {
  return RunPlan(signature, inputs, outputs, site_packs, nullptr);
}

Status Session::RunProfiled(std::string_view signature, std::span<const NamedTensor> inputs,
                            std::vector<NamedTensor>* outputs, std::vector<StepProfile>* profile) const {
  profile->clear();
  return RunPlan(signature, inputs, outputs, {}, profile);
}

Status Session::RunPlan(std::string_view signature, std::span<const NamedTensor> inputs,
                        std::vector<NamedTensor>* outputs, std::span<const PackedB* const> site_packs,
                        std::vector<StepProfile>* profile) const {
  if (compiled_->per_input != nullptr) {
    thread_local std::vector<const Tensor*> ordered;
    LS_RETURN_IF_ERROR(OrderedInputs(compiled_->model, signature, inputs, &ordered));
    LS_ASSIGN_OR_RETURN(std::shared_ptr<const Session> session, compiled_->per_input->For(ordered));
    return session->RunPlan(signature, inputs, outputs, site_packs, profile);
  }
  const Plan* plan = compiled_->Find(signature);
  if (plan == nullptr) return NotFound("no signature named '" + std::string(signature) + "'");
  const Signature& sig = plan->signature;

  if (!site_packs.empty() && site_packs.size() != plan->pack_sites.size()) {
    return InvalidArgument("signature '" + std::string(signature) + "' has " + std::to_string(plan->pack_sites.size()) +
                           " pack sites, " + std::to_string(site_packs.size()) + " packings given");
  }
  std::unique_ptr<RunScratch> scratch = plan->TakeScratch();
  std::vector<Tensor>& values = scratch->values;
  Status status = BindInputs(*plan, inputs, &values);
  const std::vector<const PackedB*>* step_packed = &plan->step_packed;
  if (!plan->pack_sites.empty()) {
    scratch->step_packed.assign(plan->step_packed.begin(), plan->step_packed.end());
    for (size_t s = 0; s < site_packs.size(); ++s) {
      const PackSiteInfo& site = plan->pack_sites[s];
      const Step& step = plan->steps[static_cast<size_t>(site.step)];
      scratch->step_packed[static_cast<size_t>(step.input_offset + site.input_index)] = site_packs[s];
    }
    step_packed = &scratch->step_packed;
  }

  // Shape inference ran at compile time on the declared shapes, where the batch is -1; the
  // concrete shapes of this request are checked by each kernel itself (every kernel is held
  // to agree with inference by tests/runtime/ops_kernel_shapes_test.cc), so the hot path does
  // not infer again.
  ArenaAllocator allocator(*plan, *scratch, compiled_->max_bytes_per_run, *outputs);
  ThreadPool& pool = *compiled_->pool;
  for (const Step& step : plan->steps) {
    if (!status.ok()) break;
    std::span<const Tensor* const> step_inputs(scratch->step_inputs.data() + step.input_offset,
                                               step.num_inputs);
    allocator.set_step(&step);
    std::span<const PackedB* const> packed;
    if (step.has_packed) {
      packed = {step_packed->data() + step.input_offset, static_cast<size_t>(step.num_inputs)};
    }
    KernelContext ctx(step_inputs, step.node->attrs, pool,
                      std::span<Tensor>(values.data() + step.first_output, step.num_outputs), &allocator,
                      packed, step.subgraphs);
    ctx.set_batch_group(compiled_->batch_group);
    const auto start = profile != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    try {
      status = step.op->compute(ctx);
    } catch (const std::bad_alloc&) {
      // Within the budget but more than the machine has free: fail this request, not the process.
      status = ResourceExhausted("out of memory");
    }
    if (profile != nullptr && status.ok()) {
      StepProfile& entry = profile->emplace_back();
      entry.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      entry.node = step.node->name;
      entry.op = step.op->name;
      for (const Tensor* in : step_inputs) entry.input_shapes.push_back(in != nullptr ? in->shape() : Shape());
      for (int k = 0; k < step.num_outputs; ++k) entry.output_shapes.push_back(values[step.first_output + k].shape());
    }
    if (!status.ok()) status = status.WithPrefix(StepLabel(step));
  }

  if (status.ok()) {
    // Into the caller's tensors from its last call when they fit (a training loop's step
    // then allocates nothing); fresh ones otherwise.
    outputs->resize(sig.outputs.size());
    for (size_t k = 0; k < sig.outputs.size(); ++k) {
      NamedTensor& out = (*outputs)[k];
      if (out.name != sig.outputs[k].key) out.name = sig.outputs[k].key;
      out.tensor.AssignCopyOf(values[plan->output_values[k]]);
    }
  }
  // Drop the caller's tensors (inputs, and outputs computed in place) so the scratch does not
  // keep them alive between calls.
  for (int v : plan->input_values) values[v] = Tensor();
  for (int v : plan->output_values) values[v] = Tensor();
  plan->ReturnScratch(std::move(scratch));
  return status;
}

const std::vector<Signature>& Session::signatures() const { return compiled_->model.graph.signatures; }

const Signature* Session::FindSignature(std::string_view name) const {
  return compiled_->model.graph.FindSignature(name);
}

Status Session::CheckInputs(std::string_view signature, std::span<const NamedTensor> inputs) const {
  if (compiled_->per_input != nullptr) {
    std::vector<const Tensor*> ordered;
    return OrderedInputs(compiled_->model, signature, inputs, &ordered);
  }
  const Plan* plan = compiled_->Find(signature);
  if (plan == nullptr) return NotFound("no signature named '" + std::string(signature) + "'");
  return BindInputs(*plan, inputs, nullptr);
}

std::vector<std::string> Session::PackSites(std::string_view signature) const {
  std::vector<std::string> inputs;
  if (const Plan* plan = compiled_->Find(signature)) {
    for (const PackSiteInfo& site : plan->pack_sites) inputs.push_back(site.input);
  }
  return inputs;
}

Status Session::PackSite(std::string_view signature, size_t site, const Tensor& value, PackedB& into,
                         ThreadPool* pool) const {
  const Plan* plan = compiled_->Find(signature);
  if (plan == nullptr) return NotFound("no signature named '" + std::string(signature) + "'");
  if (site >= plan->pack_sites.size()) return OutOfRange("no pack site " + std::to_string(site));
  const PackSiteInfo& info = plan->pack_sites[site];
  const Step& step = plan->steps[static_cast<size_t>(info.step)];
  return step.op->repack_input(step.node->attrs, info.input_index, value, into, pool);
}

const Model& Session::model() const { return compiled_->model; }

size_t Session::packed_weight_bytes() const {
  size_t bytes = 0;
  for (const auto& [key, packed] : compiled_->packed) bytes += packed != nullptr ? packed->bytes() : 0;
  if (compiled_->per_input != nullptr) bytes += compiled_->per_input->packed_weight_bytes();
  return bytes;
}

size_t Session::graphs_per_input() const {
  return compiled_->per_input != nullptr ? compiled_->per_input->size() : 0;
}

}  // namespace lockstep
