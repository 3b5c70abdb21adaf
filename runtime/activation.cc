#include "runtime/activation.h"

namespace lockstep {

std::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kTanh: return "tanh";
    case Activation::kRelu6: return "relu6";
    case Activation::kElu: return "elu";
    case Activation::kSelu: return "selu";
  }
  return "none";
}

StatusOr<Activation> ParseActivation(std::string_view name) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kSigmoid,
                       Activation::kTanh, Activation::kRelu6, Activation::kElu, Activation::kSelu}) {
    if (ActivationName(a) == name) return a;
  }
  return InvalidArgument("unknown activation '" + std::string(name) +
                         "' (expected none, relu, gelu, sigmoid, tanh, relu6, elu or selu)");
}

void ApplyActivation(Activation a, std::span<float> values) {
  if (a == Activation::kNone) return;
  // GELU's own loop, so that it vectorises (the switch per element would keep it scalar).
  if (a == Activation::kGelu) {
    for (float& v : values) v = Gelu(v);
    return;
  }
  for (float& v : values) v = ApplyActivation(a, v);
}

}  // namespace lockstep
