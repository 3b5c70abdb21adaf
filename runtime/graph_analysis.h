// Checks a Model and works out what the executor and the passes need to know about it: that
// every op is known and given a valid number of inputs, every input and weight reference
// resolves, the graph is acyclic, shape inference succeeds everywhere, and every signature
// names existing values with compatible dtypes and shapes. Each failure names the node,
// weight or signature at fault.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/op_registry.h"

namespace lockstep {

// A resolved value: output `output` of node number `node`.
struct ValueId {
  int node = -1;
  int output = 0;
  friend bool operator==(const ValueId&, const ValueId&) = default;
};

struct GraphAnalysis {
  std::vector<const OpDef*> ops;                  // per node
  std::vector<std::vector<ValueId>> inputs;       // per node
  std::vector<std::vector<TensorSpec>> outputs;   // per node, per output
  std::vector<int> topological_order;             // node indices, producers first
  std::map<std::string, int, std::less<>> node_index;

  // Resolves "node" / "node:k"; fails when the node or output does not exist.
  StatusOr<ValueId> Resolve(std::string_view ref) const;
  const TensorSpec& Spec(ValueId v) const { return outputs[v.node][v.output]; }
};

StatusOr<GraphAnalysis> AnalyzeGraph(const Model& model,
                                     const OpRegistry& registry = OpRegistry::Global());
// The same analysis of the nodes alone, without checking the signatures against it (for an
// importer that takes a signature's shapes from the graph).
StatusOr<GraphAnalysis> AnalyzeNodes(const Model& model, const OpRegistry& registry = OpRegistry::Global());

// Whether a value of spec `actual` may be bound to a signature entry declaring `declared`
// (same dtype and rank; a known declared dimension must match a known inferred one).
bool SpecCompatible(const TensorSpec& actual, const TensorSpec& declared);

}  // namespace lockstep
