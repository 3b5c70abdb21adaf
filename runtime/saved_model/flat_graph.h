// A TensorFlow GraphDef with its function calls inlined: what the importer translates.
//
// TF2 SavedModels wrap the model in functions (`StatefulPartitionedCall` / `PartitionedCall`,
// or a node whose op is the function's name); TF1 ones are flat. Flattening gives every node,
// at any depth, a unique name ("<call node>/<body node>") and one kind of reference: a node
// and an output index. A call node becomes an alias of its function's return values, and a
// function's arguments aliases of the caller's inputs, so a reference may pass through
// aliases; Resolve() follows them to the node that computes the value. Control inputs ("^n")
// carry no values and are dropped.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"

namespace lockstep {

struct FlatRef {
  std::string node;
  int index = 0;
  friend bool operator==(const FlatRef&, const FlatRef&) = default;
  // "node:index", as TensorFlow writes a tensor name.
  std::string ToString() const { return node + ":" + std::to_string(index); }
};

struct FlatNode {
  std::string name;
  const tensorflow::NodeDef* def = nullptr;  // op and attrs; owned by the GraphDef
  std::vector<FlatRef> inputs;               // data inputs, possibly through aliases
};

class FlatGraph {
 public:
  // Inlines every function call of `graph` (which must outlive the result). Fails on a call to
  // a function the library lacks, on inputs that do not match a function's arguments, on
  // recursion deeper than 64 calls and on more than a million nodes in all.
  static StatusOr<FlatGraph> Flatten(const tensorflow::GraphDef& graph);

  // The node computing `ref`, after following aliases; NotFound naming the tensor when no
  // node or output by that name exists.
  StatusOr<FlatRef> Resolve(const FlatRef& ref) const;
  // Parses a graph-level tensor name ("x", "x:0") and resolves it.
  StatusOr<FlatRef> ResolveName(std::string_view tensor_name) const;
  const FlatNode* Find(std::string_view name) const;
  template <typename F>
  void ForEachNode(F&& f) const {
    for (const auto& [name, node] : nodes_) f(node);
  }

 private:
  std::map<std::string, FlatNode, std::less<>> nodes_;
  std::map<std::string, std::vector<FlatRef>, std::less<>> aliases_;
  friend class Flattener;
};

}  // namespace lockstep
