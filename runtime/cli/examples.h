// Example models that model-cli can write, for quick starts and the server's conformance
// tests. Each is built with GraphBuilder and written as an ordinary bundle.
#pragma once

#include <string>
#include <vector>

#include "runtime/graph.h"

namespace lockstep {

// Names of the examples MakeExample knows.
std::vector<std::string> ExampleNames();

// half_plus_two: y = 0.5 * x + 2, signature serving_default, input x float32 [-1], output y
// float32 [-1] (TensorFlow Serving's classic test model).
StatusOr<Model> MakeExample(const std::string& name);

}  // namespace lockstep
