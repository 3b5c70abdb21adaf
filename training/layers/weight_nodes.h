// Hands a layer its weights as graph nodes: the node holding each (an input of the training
// graph, a constant of the serving graph), and under precision bfloat16 the bf16 copy a product
// reads: in training another input (TakesBf16Copy), in serving one Cast of the constant, shared
// by every use, which the session folds into a bf16 constant and packs once.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "runtime/graph_builder.h"

namespace lockstep::training {

class WeightNodes {
 public:
  enum class Bf16 { kNone, kInputs, kCasts };
  // `node(name)` gives the node of weight `name`.
  WeightNodes(GraphBuilder& g, std::function<std::string(const std::string&)> node, Bf16 bf16)
      : g_(g), node_(std::move(node)), bf16_(bf16) {}

  // The weight as float32.
  std::string Get(const std::string& name) { return node_(name); }
  // The weight as a product (a matmul or convolution) reads it: its bf16 copy under bfloat16.
  std::string ForProduct(const std::string& name);
  // The attrs of a product: precision bfloat16 makes its gradients bf16 products too.
  AttrMap ProductAttrs(AttrMap attrs) const;

 private:
  GraphBuilder& g_;
  std::function<std::string(const std::string&)> node_;
  Bf16 bf16_;
  std::map<std::string, std::string> cast_;
};

}  // namespace lockstep::training
