// GraphBuilder: the convenient way to write a Model in code (examples, tests, the trainer's
// export). Each call adds a node and returns the name of its output for use as an input.
#pragma once

#include <string>
#include <vector>

#include "runtime/graph.h"

namespace lockstep {

class GraphBuilder {
 public:
  // A signature input placeholder.
  std::string Input(const std::string& name, DType dtype, const Shape& shape);
  // A constant; its value is stored as the weight of the same name.
  std::string Const(const std::string& name, Tensor value);
  // A trainable weight, stored as the weight of the same name.
  std::string Variable(const std::string& name, Tensor value);
  // Any registered op. An empty name becomes "<op>_<n>".
  std::string Op(const std::string& op, std::vector<std::string> inputs, AttrMap attrs = {},
                 std::string name = "");

  void AddSignature(Signature signature) { model_.graph.signatures.push_back(std::move(signature)); }
  void SetMetadata(const std::string& key, const std::string& value) { model_.graph.metadata[key] = value; }

  const Model& model() const { return model_; }
  Model Build() && { return std::move(model_); }

 private:
  Model model_;
  int counter_ = 0;
};

}  // namespace lockstep
