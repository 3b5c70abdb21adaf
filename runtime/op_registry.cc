#include "runtime/op_registry.h"

#include <new>

#include "runtime/ops/ops.h"

namespace lockstep {

StatusOr<Tensor*> KernelContext::AllocateOutput(int i, DType dtype, const Shape& shape) {
  // Kernels derive output shapes from input shapes (a broadcast multiplies them), so a small
  // request can describe a huge output; check before anything is allocated.
  auto elements = shape.CheckedNumElements(Shape::kMaxElements);
  if (!elements.ok()) return ResourceExhausted("output " + std::to_string(i) + ": " + elements.status().message());
  const size_t bytes = static_cast<size_t>(*elements) * DTypeSize(dtype);
  if (allocator_ != nullptr) {
    LS_ASSIGN_OR_RETURN(outputs_[i], allocator_->Allocate(i, dtype, shape, bytes));
  } else {
    if (bytes > kDefaultMaxTensorBytes) {
      return ResourceExhausted("output " + std::to_string(i) + " of shape " + shape.ToString() + " needs " +
                               std::to_string(bytes) + " bytes, more than the limit of " +
                               std::to_string(kDefaultMaxTensorBytes));
    }
    outputs_[i] = Tensor(dtype, shape);
  }
  return &outputs_[i];
}

namespace {

StatusOr<std::vector<TensorSpec>> InferNothing(const ShapeInferenceContext&) {
  return Internal("the executor infers Input, Const and Variable itself");
}

OpRegistry BuildGlobal() {
  OpRegistry registry;
  for (std::string_view name : {kInputOp, kConstOp, kVariableOp}) {
    OpDef def;
    def.name = std::string(name);
    def.infer = InferNothing;
    def.deterministic = name != kInputOp;
    (void)registry.Register(std::move(def));
  }
  RegisterStandardOps(registry);
  return registry;
}

}  // namespace

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry registry = BuildGlobal();
  return registry;
}

Status OpRegistry::Register(OpDef def) {
  if (def.name.empty() || def.infer == nullptr) {
    return InvalidArgument("op '" + def.name + "' needs a name and a shape function");
  }
  std::string name = def.name;
  if (!ops_.emplace(name, std::move(def)).second) return AlreadyExists("op '" + name + "' registered twice");
  return Status::Ok();
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::OpNames() const {
  std::vector<std::string> names;
  for (const auto& [name, def] : ops_) names.push_back(name);
  return names;
}

int NodeOutputCount(const OpDef& op, const AttrMap& attrs) {
  if (op.num_outputs >= 0) return op.num_outputs;
  StatusOr<int64_t> n = attrs.GetInt("num_outputs");
  return n.ok() && *n >= 0 && *n <= (int64_t{1} << 20) ? static_cast<int>(*n) : -1;
}

StatusOr<std::vector<Tensor>> RunOp(const OpDef& op, std::span<const Tensor> inputs,
                                    const AttrMap& attrs, ThreadPool& pool) {
  if (op.compute == nullptr) return InvalidArgument("op '" + op.name + "' has no kernel");
  const int n = static_cast<int>(inputs.size());
  if (n < op.min_inputs || (op.max_inputs >= 0 && n > op.max_inputs)) {
    return InvalidArgument("op '" + op.name + "' given " + std::to_string(n) + " inputs");
  }
  std::vector<TensorSpec> specs;
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : inputs) {
    specs.push_back({t.dtype(), t.shape()});
    pointers.push_back(&t);
  }
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> out_specs, op.infer({specs, attrs}));
  std::vector<Tensor> outputs(out_specs.size());
  KernelContext ctx(pointers, attrs, pool, outputs, nullptr);
  try {
    LS_RETURN_IF_ERROR(op.compute(ctx));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("op '" + op.name + "': out of memory");
  }
  return outputs;
}

StatusOr<std::vector<Tensor>> RunOp(std::string_view op_name, std::span<const Tensor> inputs,
                                    const AttrMap& attrs) {
  const OpDef* op = OpRegistry::Global().Find(op_name);
  if (op == nullptr) return NotFound("unknown op '" + std::string(op_name) + "'");
  return RunOp(*op, inputs, attrs, ThreadPool::Default());
}

}  // namespace lockstep
