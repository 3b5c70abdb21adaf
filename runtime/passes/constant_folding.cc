#include <new>

#include "runtime/graph_analysis.h"
#include "runtime/passes/passes.h"

namespace lockstep {
namespace {

// Folding a node whose result is much larger than its inputs (a broadcast) would bloat the
// weights held in memory; past this many elements we leave the node to run per request.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;

// Folding repeats while a round made shapes known that were not (a Reshape that took its
// constant target, a fold of a value whose shape inference could not tell): a Shape further
// down may then fold in turn. One round per link of such a chain; a longer chain keeps the
// rest of its shape computations to run time, which is slower but no less correct.
constexpr int kMaxRounds = 16;

bool IsConstant(const OpDef& op) { return op.name == kConstOp || op.name == kVariableOp; }

std::string UniqueWeightName(const WeightMap& weights, const std::string& base) {
  std::string name = base;
  for (int i = 1; weights.count(name) > 0; ++i) name = base + "/folded_" + std::to_string(i);
  return name;
}

const Tensor& ConstantValue(const Model& model, int node) {
  const NodeDef& producer = model.graph.nodes[static_cast<size_t>(node)];
  return model.weights.find(std::get<std::string>(producer.attrs.values().at("weight")))->second;
}

void ReplaceByConst(Model& model, int i, Tensor value) {
  NodeDef& node = model.graph.nodes[static_cast<size_t>(i)];
  std::string weight = UniqueWeightName(model.weights, node.name);
  model.weights[weight] = std::move(value);
  node.op = std::string(kConstOp);
  node.inputs.clear();
  node.attrs = AttrMap{{"weight", weight}};
}

// Per node: whether its shape at run time may differ from what inference says, because it is
// computed from an Input that a signature feeds with any shape (TensorBinding::any_shape).
std::vector<bool> UnreliableShapes(const Model& model, const GraphAnalysis& a) {
  std::vector<bool> unreliable(model.graph.nodes.size(), false);
  for (const Signature& sig : model.graph.signatures) {
    for (const TensorBinding& b : sig.inputs) {
      auto v = a.Resolve(b.tensor);
      if (b.any_shape && v.ok()) unreliable[static_cast<size_t>(v->node)] = true;
    }
  }
  for (int i : a.topological_order) {
    for (ValueId v : a.inputs[static_cast<size_t>(i)]) {
      if (unreliable[static_cast<size_t>(v.node)]) unreliable[static_cast<size_t>(i)] = true;
    }
  }
  return unreliable;
}

// The value of a Shape node whose input's shape inference knows exactly, or an error.
StatusOr<Tensor> StaticShape(const OpDef& op, const NodeDef& node, const TensorSpec& in, ThreadPool& pool) {
  if (!in.shape.IsFullyDefined()) return InvalidArgument("not static");
  // The kernel reads only its input's shape: a view over no memory stands in for the value.
  return EvaluateConstantOp(op, {Tensor::View(DType::kFloat32, in.shape, nullptr, nullptr)}, node.attrs, pool, kMaxFoldedElements);
}

// Reshape(x, constant target) becomes Reshape(x; attr shape), which tells shape inference the
// dimensions. A 0 in the target copies x's dimension there (unless allowzero): it is resolved
// from x's inferred shape, so only when that dimension is known and reliable. Returns whether
// the node was rewritten.
bool TakeConstantTarget(Model& model, const GraphAnalysis& a, int i, const std::vector<bool>& constant,
                        const std::vector<bool>& unreliable) {
  NodeDef& node = model.graph.nodes[static_cast<size_t>(i)];
  const std::vector<ValueId>& in = a.inputs[static_cast<size_t>(i)];
  if (in.size() != 2 || !constant[static_cast<size_t>(in[1].node)]) return false;
  const Tensor& target = ConstantValue(model, in[1].node);
  if ((target.dtype() != DType::kInt32 && target.dtype() != DType::kInt64) || target.shape().rank() != 1 ||
      target.num_elements() > Shape::kMaxRank) {
    return false;
  }
  auto allow_zero = node.attrs.GetBoolOr("allowzero", false);
  if (!allow_zero.ok()) return false;
  const TensorSpec& x = a.Spec(in[0]);
  std::vector<int64_t> dims;
  for (int64_t k = 0; k < target.num_elements(); ++k) {
    int64_t d = target.dtype() == DType::kInt32 ? target.data<int32_t>()[static_cast<size_t>(k)]
                                                : target.data<int64_t>()[static_cast<size_t>(k)];
    if (d == 0 && !*allow_zero) {
      if (unreliable[static_cast<size_t>(in[0].node)] || k >= x.shape.rank() || x.shape.dim(static_cast<int>(k)) < 0) {
        return false;
      }
      d = x.shape.dim(static_cast<int>(k));
    }
    dims.push_back(d);
  }
  AttrMap attrs{{"shape", std::move(dims)}};
  // A target the attr form rejects is left for the kernel to report, per request.
  if (!a.ops[static_cast<size_t>(i)]->infer({std::span<const TensorSpec>(&x, 1), attrs}).ok()) return false;
  node.inputs.resize(1);
  node.attrs = std::move(attrs);
  return true;
}

// One sweep in topological order. Returns whether it made a shape known that inference did
// not know, so that another round may fold more.
StatusOr<bool> FoldRound(Model& model, ThreadPool& pool, const OpRegistry& registry) {
  LS_ASSIGN_OR_RETURN(GraphAnalysis a, AnalyzeGraph(model, registry));
  const std::vector<bool> unreliable = UnreliableShapes(model, a);
  auto& nodes = model.graph.nodes;
  std::vector<bool> constant(nodes.size(), false);
  bool more = false;
  for (int i : a.topological_order) {
    const OpDef& op = *a.ops[i];
    if (IsConstant(op)) {
      constant[i] = true;
      continue;
    }
    if (op.compute == nullptr || !op.deterministic || op.num_outputs != 1 || a.inputs[i].empty()) continue;
    // A Shape whose input's shape is static is constant whatever the input's values.
    if (op.name == "Shape" && !unreliable[static_cast<size_t>(a.inputs[i][0].node)]) {
      auto value = StaticShape(op, nodes[i], a.Spec(a.inputs[i][0]), pool);
      if (value.ok()) {
        ReplaceByConst(model, i, std::move(*value));
        constant[i] = true;
        continue;
      }
    }
    bool all_constant = true;
    for (ValueId v : a.inputs[i]) all_constant = all_constant && constant[v.node];
    if (!all_constant) {
      if (op.name == "Reshape" && TakeConstantTarget(model, a, i, constant, unreliable)) more = true;
      continue;
    }
    const Shape& inferred = a.outputs[i][0].shape;
    if (inferred.num_elements() > kMaxFoldedElements) continue;

    std::vector<Tensor> inputs;
    for (ValueId v : a.inputs[i]) inputs.push_back(ConstantValue(model, v.node));
    auto result = EvaluateConstantOp(op, inputs, nodes[i].attrs, pool, kMaxFoldedElements);
    // A kernel that rejects its constant inputs will reject them at run time too; leave the
    // node in place so that the error surfaces where the user can see which request hit it.
    if (!result.ok()) continue;
    more = more || !inferred.IsFullyDefined();
    ReplaceByConst(model, i, std::move(*result));
    constant[i] = true;
  }
  return more;
}

}  // namespace

Status FoldConstants(Model& model, ThreadPool& pool, const OpRegistry& registry) {
  for (int round = 0; round < kMaxRounds; ++round) {
    Model before = model;  // weights share their storage: a cheap copy
    LS_ASSIGN_OR_RETURN(bool more, FoldRound(model, pool, registry));
    // Shapes made known may contradict a shape downstream that inference let pass as unknown
    // (a graph that fails every request). Such a graph keeps what it had before this round,
    // and fails per request as it would have unoptimized.
    if (!AnalyzeGraph(model, registry).ok()) {
      model = std::move(before);
      break;
    }
    if (!more) break;
  }
  return Status::Ok();
}

namespace {

// Refuses outputs of more than `max_elements` elements before they are allocated.
class BoundedAllocator final : public OutputAllocator {
 public:
  explicit BoundedAllocator(int64_t max_elements) : max_elements_(max_elements) {}
  StatusOr<Tensor> Allocate(int, DType dtype, const Shape& shape, size_t) override {
    if (shape.num_elements() > max_elements_) return ResourceExhausted("too large to fold");
    return Tensor(dtype, shape);
  }

 private:
  int64_t max_elements_;
};

}  // namespace

StatusOr<Tensor> EvaluateConstantOp(const OpDef& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                    ThreadPool& pool, int64_t max_elements) {
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : inputs) pointers.push_back(&t);
  std::vector<Tensor> outputs(1);
  BoundedAllocator allocator(max_elements);
  KernelContext ctx(pointers, attrs, pool, outputs, &allocator);
  try {
    LS_RETURN_IF_ERROR(op.compute(ctx));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory");
  }
  // An op that aliases its input allocates nothing.
  if (outputs[0].num_elements() > max_elements) return ResourceExhausted("too large to fold");
  return std::move(outputs[0]);
}

}  // namespace lockstep
