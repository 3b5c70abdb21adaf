#include "runtime/activation.h"

namespace lockstep {

std::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kTanh: return "tanh";
  }
  return "none";
}

StatusOr<Activation> ParseActivation(std::string_view name) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kSigmoid,
                       Activation::kTanh}) {
    if (ActivationName(a) == name) return a;
  }
  return InvalidArgument("unknown activation '" + std::string(name) +
                         "' (expected none, relu, gelu, sigmoid or tanh)");
}

void ApplyActivation(Activation a, std::span<float> values) {
  if (a == Activation::kNone) return;
  for (float& v : values) v = ApplyActivation(a, v);
}

}  // namespace lockstep
