// The op table of the SavedModel importer: how one TensorFlow node becomes Lockstep nodes.
// A translator sees the node (op, attrs), its inputs as Lockstep values, and which of them are
// constants with what value (a shape, an axis, a permutation), and emits nodes through the
// context. Variables, placeholders and function calls are the importer's (saved_model.cc),
// not the table's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/attr.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "tensorflow/core/framework/node_def.pb.h"

namespace lockstep {

class TranslationContext {
 public:
  virtual ~TranslationContext() = default;
  virtual const tensorflow::NodeDef& node() const = 0;
  // The emitted name of the node being translated ("y", or "classify/y" after a clash).
  virtual const std::string& name() const = 0;
  virtual const std::vector<std::string>& inputs() const = 0;
  // The value of input `i` when it is a constant, else null.
  virtual const Tensor* ConstantInput(size_t i) const = 0;
  // Adds a node named name() + suffix (suffix "" for the node that yields the result) and
  // returns its output 0 as a value.
  virtual std::string Emit(const std::string& op, std::vector<std::string> inputs, AttrMap attrs,
                           std::string_view suffix = "") = 0;
  // Adds a constant node (and its weight) named name() + suffix.
  virtual std::string EmitConstant(Tensor value, std::string_view suffix = "") = 0;

  // The node's attrs, typed; errors name the node and the attr.
  StatusOr<DType> TypeAttr(const std::string& attr) const;
  StatusOr<std::string> StringAttr(const std::string& attr, std::string fallback) const;
  StatusOr<bool> BoolAttr(const std::string& attr, bool fallback) const;
  StatusOr<std::vector<int64_t>> IntListAttr(const std::string& attr) const;
  StatusOr<int64_t> IntAttr(const std::string& attr, int64_t fallback) const;
  StatusOr<std::vector<DType>> TypeListAttr(const std::string& attr) const;
  // A list of shapes; an unknown rank is an error, unknown dimensions are -1.
  StatusOr<std::vector<Shape>> ShapeListAttr(const std::string& attr) const;
  // An error naming the node and its op.
  Status Error(const std::string& what) const;
};

// Translates the current node; `outputs` receives one value per TensorFlow output used.
using OpTranslator = Status (*)(TranslationContext& ctx, std::vector<std::string>* outputs);

// The translator for TensorFlow op `op`, or null when the importer cannot translate it.
OpTranslator FindOpTranslator(std::string_view op);
// Every op the table translates, sorted (for error messages and docs).
std::vector<std::string> TranslatedOps();

}  // namespace lockstep
