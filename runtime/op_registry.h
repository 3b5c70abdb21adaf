// The op registry: for each op, how many inputs and outputs it has, how its output dtypes and
// shapes follow from its inputs (shape inference), its forward kernel, and its gradient. The
// graph validator, the passes and the executor all ask the registry; nothing else knows what an
// op does.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attr.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/thread_pool.h"

namespace lockstep {

// What shape inference knows about a value: its dtype, and its shape with -1 for dimensions
// known only at run time.
struct TensorSpec {
  DType dtype = DType::kInvalid;
  Shape shape;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

struct ShapeInferenceContext {
  std::span<const TensorSpec> inputs;
  const AttrMap& attrs;
  // Parallel to `inputs`, or empty: the value of each input that is a constant (a weight, or
  // what the importer folded), null for the others. Ops whose output shape follows from an
  // input's value (Slice's bounds, Reshape's shape, Resize's sizes) give exact dimensions
  // where they have it, and -1 where they do not.
  std::span<const Tensor* const> values = {};

  const Tensor* value(size_t i) const { return i < values.size() ? values[i] : nullptr; }
};

// Where a kernel's outputs get their memory. The executor hands out reusable arena buffers;
// the default (heap) gives each output fresh owned storage.
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  // Returns writable storage for output `index`, aligned to kTensorAlignment, or
  // ResourceExhausted when `bytes` (already checked against overflow) is more than the
  // allocator will give.
  virtual StatusOr<Tensor> Allocate(int index, DType dtype, const Shape& shape, size_t bytes) = 0;
};

// The most bytes one tensor computed by a kernel may take when no budget says otherwise
// (RunOp, constant folding). A request must not be able to ask a kernel for the machine.
inline constexpr size_t kDefaultMaxTensorBytes = size_t{4} << 30;

class BatchGroup;  // runtime/batch_group.h
class PackedB;     // runtime/matmul/packed_b.h
class Session;     // runtime/session.h

// A control-flow node's body, compiled by the session that runs the node (one per attribute
// that holds a graph): its signature is the graph's one signature.
struct CompiledSubgraph {
  std::string_view attr;
  const Session* session = nullptr;
};

class KernelContext {
 public:
  // `packed` is empty, or parallel to `inputs`: the pre-packed form of each constant input
  // the op packs (OpDef::pack_constant), null for the others.
  KernelContext(std::span<const Tensor* const> inputs, const AttrMap& attrs, ThreadPool& pool,
                std::span<Tensor> outputs, OutputAllocator* allocator,
                std::span<const PackedB* const> packed = {}, std::span<const CompiledSubgraph> subgraphs = {})
      : inputs_(inputs), attrs_(attrs), pool_(pool), outputs_(outputs), allocator_(allocator),
        packed_(packed), subgraphs_(subgraphs) {}

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return *inputs_[i]; }
  // Input i packed for the matmul core when the session packed it, else null.
  const PackedB* packed_input(int i) const {
    return static_cast<size_t>(i) < packed_.size() ? packed_[i] : nullptr;
  }
  const AttrMap& attrs() const { return attrs_; }
  ThreadPool& pool() const { return pool_; }
  // The compiled body held by attribute `attr`; null outside a session (RunOp, folding).
  const Session* subgraph(std::string_view attr) const {
    for (const CompiledSubgraph& s : subgraphs_) {
      if (s.attr == attr) return s.session;
    }
    return nullptr;
  }
  // The replicas this run's batch is cut among (SessionOptions::batch_group); null when the
  // batch is the run's own.
  BatchGroup* batch_group() const { return batch_group_; }
  void set_batch_group(BatchGroup* group) { batch_group_ = group; }

  // Storage for output i. Contents are unspecified: the kernel writes every element. Fails
  // (ResourceExhausted) when the shape is too large to hold or exceeds the run's budget.
  StatusOr<Tensor*> AllocateOutput(int i, DType dtype, const Shape& shape);
  // Sets output i to an existing tensor (an input reshaped, for ops that alias).
  void SetOutput(int i, Tensor t) { outputs_[i] = std::move(t); }

 private:
  std::span<const Tensor* const> inputs_;
  const AttrMap& attrs_;
  ThreadPool& pool_;
  std::span<Tensor> outputs_;
  OutputAllocator* allocator_;
  std::span<const PackedB* const> packed_;
  std::span<const CompiledSubgraph> subgraphs_;
  BatchGroup* batch_group_ = nullptr;
};

using ShapeFn = StatusOr<std::vector<TensorSpec>> (*)(const ShapeInferenceContext&);
using KernelFn = Status (*)(KernelContext&);
// Packs input `input`, whose value is the constant `value`, for the matmul core: called once
// when a session is built, so that no run re-packs a weight. Returns null when that input is
// not one the op packs. Errors are the op's own shape errors, reported at session creation.
// `pool` (never null) shares out the packing of a large weight.
using PackFn = StatusOr<std::shared_ptr<const PackedB>> (*)(const AttrMap& attrs, int input,
                                                            const Tensor& value, ThreadPool* pool);
// Packs input `input` of a node, whose value for the coming run is `value`, into `into`, in
// place (no allocation once `into` has held a packing that size): a trainer packs each fed
// weight once per step for every replica (SessionOptions::packed_by_caller). Errors as PackFn's.
using RepackFn = Status (*)(const AttrMap& attrs, int input, const Tensor& value, PackedB& into, ThreadPool* pool);
// Builds the gradient of an op's inputs from the gradient of its outputs, as backward nodes
// (runtime/autodiff/). Registered beside the op's forward kernel; null for ops that are not
// differentiated (integer ops, ArgMax, Cast, the serving-only fused ops).
class GradientBuilder;
using GradientFn = Status (*)(GradientBuilder&);

struct OpDef {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: any number
  int num_outputs = 1;  // -1: as many as the node's attr "num_outputs" says (NodeOutputCount)
  ShapeFn infer = nullptr;
  KernelFn compute = nullptr;  // null only for the executor's own ops (Input, Const, Variable)
  GradientFn gradient = nullptr;
  // For ops whose constant inputs feed the matmul core. A kernel given an input's packed form
  // reads only that input's dtype and shape, never its data, which a session may have dropped
  // (SessionOptions::release_packed_weights).
  PackFn pack_constant = nullptr;
  RepackFn repack_input = nullptr;  // the same packing, of a fed input, into the caller's storage
  int repacked_input = -1;          // the input repack_input packs (a product's right-hand operand)
  // Output 0 may be input 0's storage under another shape (Identity, Reshape, Flatten).
  bool aliases_input = false;
  // Same inputs always give the same outputs; constant folding may evaluate it.
  bool deterministic = true;
};

class OpRegistry {
 public:
  // The registry with every standard op, built on first use.
  static const OpRegistry& Global();

  Status Register(OpDef def);
  const OpDef* Find(std::string_view name) const;
  std::vector<std::string> OpNames() const;

 private:
  std::map<std::string, OpDef, std::less<>> ops_;
};

// How many outputs a node of `op` with `attrs` has: OpDef::num_outputs, or the node's own
// "num_outputs" attr for ops whose count varies (control flow); -1 when that attr is missing
// or negative.
int NodeOutputCount(const OpDef& op, const AttrMap& attrs);

// Runs one op on owned, freshly allocated outputs: for constant folding and tests.
StatusOr<std::vector<Tensor>> RunOp(const OpDef& op, std::span<const Tensor> inputs,
                                    const AttrMap& attrs, ThreadPool& pool);
StatusOr<std::vector<Tensor>> RunOp(std::string_view op_name, std::span<const Tensor> inputs,
                                    const AttrMap& attrs = {});

// The executor's own ops, which have no kernel.
inline constexpr std::string_view kInputOp = "Input";        // attrs: dtype, shape
inline constexpr std::string_view kConstOp = "Const";        // attr: weight (a weight's name)
inline constexpr std::string_view kVariableOp = "Variable";  // attr: weight; trainable

}  // namespace lockstep
