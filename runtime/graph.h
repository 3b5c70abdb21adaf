// The graph IR: what a model computes, as plain values. Nodes name their op, their inputs
// (other nodes' outputs) and their attributes; constants and variables are nodes that name a
// weight; signatures give the graph its public, named inputs and outputs. A Model is a graph
// with the weights it refers to. Serialised by graph_proto.h; checked by graph_analysis.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attr.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace lockstep {

struct NodeDef {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;  // "node" (output 0) or "node:k"
  AttrMap attrs;
};

// One public input or output of a signature.
struct TensorBinding {
  std::string key;     // what clients call it ("x")
  std::string tensor;  // the graph value behind it ("x", "dense/out:0")
  DType dtype = DType::kFloat32;
  Shape shape;         // -1 for dimensions chosen by the caller (the batch)
  // Inputs only: any shape is accepted, and `shape` is what the graph was built for. So
  // TensorFlow feeds a SavedModel's placeholders (it never checks a feed against its declared
  // shape, and TF Serving's clients rely on that); the kernels check what they are given.
  bool any_shape = false;
};

struct Signature {
  std::string name;         // "serving_default"
  std::string method_name;  // "tensorflow/serving/predict" and friends; informational
  std::vector<TensorBinding> inputs;
  std::vector<TensorBinding> outputs;
};

inline constexpr std::string_view kDefaultSignature = "serving_default";

struct Graph {
  std::vector<NodeDef> nodes;
  std::vector<Signature> signatures;
  std::map<std::string, std::string> metadata;

  const NodeDef* FindNode(std::string_view name) const;
  const Signature* FindSignature(std::string_view name) const;
};

using WeightMap = std::map<std::string, Tensor, std::less<>>;

struct Model;

// How a model whose graph depends on what its inputs are (an ONNX model whose ranks, or the
// branches its Ifs take, follow from its input shapes) makes the graph for one run. Both take
// the run's inputs in the signature's input order, already checked against it.
struct GraphPerInput {
  // Runs whose keys are equal run on one graph (the input shapes, and where the graph needs
  // them the values of scalar inputs).
  // Written into `key` (its capacity kept from run to run, so a warm run allocates no key).
  std::function<void(std::span<const Tensor* const> inputs, std::string* key)> key;
  std::function<StatusOr<Model>(std::span<const Tensor* const> inputs)> make;
};

struct Model {
  Graph graph;
  WeightMap weights;
  // Set for a model whose graph is made per input (GraphPerInput): `graph` then holds its
  // signatures and metadata alone, and the session makes and caches a graph per key.
  std::shared_ptr<const GraphPerInput> per_input = nullptr;
};

// A parsed value reference: node name and output index.
struct TensorRef {
  std::string_view node;
  int index = 0;
};

// Parses "node" or "node:k". Fails on an empty name or a malformed index.
StatusOr<TensorRef> ParseTensorRef(std::string_view ref);

}  // namespace lockstep
