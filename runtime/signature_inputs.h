// The checks a session makes of a run's inputs against a signature: every input key exactly
// once, with the signature's dtype and a shape matching its pattern. No allocation unless a
// check fails (the error's message).
#pragma once

#include <span>
#include <string>

#include "runtime/graph.h"
#include "runtime/session.h"
#include "runtime/status.h"

namespace lockstep {

// One input against its binding: the dtype, and a shape matching `pattern` unless the binding
// takes any shape.
inline Status CheckInput(const TensorBinding& binding, const Shape& pattern, const Tensor& t) {
  if (t.dtype() != binding.dtype) {
    return InvalidArgument("input '" + binding.key + "' must be " + std::string(DTypeName(binding.dtype)) +
                           ", got " + std::string(DTypeName(t.dtype())));
  }
  if (!binding.any_shape && !t.shape().MatchesPattern(pattern)) {
    return InvalidArgument("input '" + binding.key + "' must have shape " + pattern.ToString() +
                           ", got " + t.shape().ToString());
  }
  return Status::Ok();
}

// Checks `inputs` against `sig` (every input once, with its dtype and a shape matching its
// pattern: patterns[k], or the declared shape where `patterns` is empty) and calls
// found(k, tensor) for each input k of the signature.
template <typename Found>
Status MatchInputs(const Signature& sig, std::span<const Shape> patterns, std::span<const NamedTensor> inputs,
                   Found&& found) {
  for (const NamedTensor& given : inputs) {
    bool known = false;
    for (const TensorBinding& b : sig.inputs) known = known || b.key == given.name;
    if (!known) return InvalidArgument("signature '" + sig.name + "' has no input '" + given.name + "'");
  }
  for (size_t k = 0; k < sig.inputs.size(); ++k) {
    const TensorBinding& binding = sig.inputs[k];
    const NamedTensor* match = nullptr;
    for (const NamedTensor& given : inputs) {
      if (given.name != binding.key) continue;
      if (match != nullptr) return InvalidArgument("input '" + binding.key + "' given twice");
      match = &given;
    }
    if (match == nullptr) return InvalidArgument("missing input '" + binding.key + "' of signature '" + sig.name + "'");
    LS_RETURN_IF_ERROR(CheckInput(binding, patterns.empty() ? binding.shape : patterns[k], match->tensor));
    found(k, match->tensor);
  }
  return Status::Ok();
}

}  // namespace lockstep
