// Reverse-mode automatic differentiation on the graph IR: adds to a model the nodes that
// compute the gradient of a scalar loss with respect to chosen values (the trainer's
// variables). The backward graph is an ordinary part of the model, so the executor runs it and
// the passes (constant folding, fusion, memory planning) apply to it like to the forward one.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/op_registry.h"

namespace lockstep {

// Returns one value reference per entry of `wrt`: d loss / d wrt[i]. `loss` must be a scalar
// float32 or float64 value. Fails, naming the node, when a node on a path from `wrt` to `loss`
// has an op without a gradient, and when some wrt[i] does not reach the loss. Gradients
// arriving at a value from several consumers are summed in a fixed order, so the backward
// graph is the same on every call.
StatusOr<std::vector<std::string>> AddGradients(Model& model, const std::string& loss,
                                                std::span<const std::string> wrt,
                                                const OpRegistry& registry = OpRegistry::Global());

}  // namespace lockstep
