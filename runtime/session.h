// Session: a Model compiled once into an immutable plan per signature, run many times.
// (A model whose graph is made per input, Model::per_input, is compiled per key instead, on
// the first run of each: runtime/sessions_per_input.h.)
//
// Create() validates the model, runs the graph passes (constant folding, MatMul + BiasAdd +
// activation fusion, dead-node elimination), orders the steps, packs every constant weight
// matrix for the matmul core and plans the reuse of intermediate buffers. Run() may be called from any number of threads at once: each call
// takes a scratch (values and arena buffers) of its own from a pool and gives it back, so a
// warmed-up session allocates no intermediate values: only the owned copies of the outputs it
// returns, which a caller can keep reusing (Run), and string tensors, which live on the heap.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/thread_pool.h"

namespace lockstep {

class BatchGroup;        // runtime/batch_group.h
class SessionsPerInput;  // runtime/sessions_per_input.h
class PackedB;     // runtime/matmul/packed_b.h

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// One step of a profiled run (Session::RunProfiled): the node, its op, the shapes it read and
// wrote, and the wall time of its kernel.
struct StepProfile {
  std::string node;
  std::string op;
  std::vector<Shape> input_shapes;
  std::vector<Shape> output_shapes;
  double seconds = 0;
};

struct SessionOptions {
  // Intra-op parallelism; null means ThreadPool::Default().
  ThreadPool* pool = nullptr;
  // Run the graph passes. Off gives the reference the pass tests compare against.
  bool optimize = true;
  // Let intermediate values share buffers (the memory plan). Off: one buffer per value.
  bool reuse_buffers = true;
  // The most bytes the kernels of one Run may ask for, all outputs together; a request
  // that needs more fails with ResourceExhausted instead of taking the machine's memory.
  size_t max_bytes_per_run = size_t{4} << 30;
  // Serve a float32 model's matrix products and convolutions on the bf16 matmul core
  // (UseBf16Products in runtime/passes/passes.h): faster where the CPU has bf16 instructions,
  // at bf16's precision (about 3 significant digits per operand).
  bool bf16_products = false;
  // Signature inputs the caller packs for the matmul core itself, once for many runs (a
  // trainer's weights, packed once per step for all its replicas): each product that reads
  // one as its packed operand becomes a pack site (PackSites). Runs given no packing for a
  // site pack it themselves, as for any fed input.
  std::vector<std::string> packed_by_caller = {};
  // Drop the data of every weight that the runs read only in its packed form (a product's
  // constant right-hand side), keeping its dtype and shape, once it is packed; and copy the
  // few weights still read as they are (biases, ...) out of a shared image when that lets the
  // image go (a bundle's weights, runtime/bundle/file_image.h). A served version then holds
  // its matrices once, packed, instead of twice. Off where a caller reads the weights back.
  bool release_packed_weights = false;
  // The replicas the batches of this session's runs are cut among (a trainer's replica; see
  // runtime/batch_group.h), for the ops that take statistics of the whole batch. Must outlive
  // the session; null: each run's batch is whole.
  BatchGroup* batch_group = nullptr;
  // A model whose graph is made per input (Model::per_input): the most graphs kept compiled,
  // one per key, the least recently used dropped (runtime/sessions_per_input.h).
  size_t max_graphs_per_input = 8;
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Create(Model model, const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs `signature` on `inputs`, which must give every input key of the signature exactly
  // once, with its dtype and a shape matching its declared one. On success `outputs` holds
  // one owned tensor per output key, in the signature's order. A tensor `outputs` already
  // holds (from the last call) is written in place when it has the right dtype and shape and
  // nothing else shares it, so a loop that passes the same vector allocates no outputs.
  // (Kernels then compute straight into those tensors, so after a failed Run they hold
  // unspecified values: read `outputs` only on success.)
  Status Run(std::string_view signature, std::span<const NamedTensor> inputs,
             std::vector<NamedTensor>* outputs) const;

  // Run, timing each step: `profile` gets one entry per step of the plan, in the order they
  // ran (up to the step that failed). For finding where a model's time goes, not for serving:
  // it allocates the entries.
  Status RunProfiled(std::string_view signature, std::span<const NamedTensor> inputs,
                     std::vector<NamedTensor>* outputs, std::vector<StepProfile>* profile) const;

  // Run, with `site_packs` parallel to PackSites(signature): each site's operand as PackSite
  // packed it from this run's input (null: the product packs it itself).
  Status Run(std::string_view signature, std::span<const NamedTensor> inputs, std::vector<NamedTensor>* outputs,
             std::span<const PackedB* const> site_packs) const;
  // The input each pack site of `signature` packs, in site order (empty for none).
  std::vector<std::string> PackSites(std::string_view signature) const;
  // Packs site `site` of `signature` from `value`, the tensor the coming runs get for its
  // input, into `into` (no allocation once `into` has held one that size).
  Status PackSite(std::string_view signature, size_t site, const Tensor& value, PackedB& into,
                  ThreadPool* pool = nullptr) const;

  // The checks Run makes of its inputs, without running: every input key exactly once, with
  // its dtype and a shape matching its declared one. (A batcher checks each request alone
  // before merging it with others, so that one bad request cannot fail a whole batch.)
  Status CheckInputs(std::string_view signature, std::span<const NamedTensor> inputs) const;

  const std::vector<Signature>& signatures() const;
  const Signature* FindSignature(std::string_view name) const;
  // The model as compiled (after the passes). Under release_packed_weights, the weights it
  // dropped have their dtype and shape but no data (raw_data() is null).
  const Model& model() const;
  // Bytes of the weight matrices packed for the matmul core when the session was built, held
  // beside the model's own weights (so no run ever packs a weight); for a model made per
  // input, of every graph kept.
  size_t packed_weight_bytes() const;
  // For a model made per input: the graphs compiled and kept now (else 0).
  size_t graphs_per_input() const;

  struct Compiled;
  // Only Create can make the key, so only Create can construct a Session.
  class Key {
    friend class Session;
    Key() = default;
  };
  Session(Key, std::unique_ptr<Compiled> compiled);

 private:
  Status RunPlan(std::string_view signature, std::span<const NamedTensor> inputs, std::vector<NamedTensor>* outputs,
                 std::span<const PackedB* const> site_packs, std::vector<StepProfile>* profile) const;

  std::unique_ptr<Compiled> compiled_;
};

}  // namespace lockstep
