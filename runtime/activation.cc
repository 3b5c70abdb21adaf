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

namespace {

// One loop per activation, the activation a constant in it, so that the switch folds away and
// the loop vectorises (Relu, Relu6, GELU); the others call libm per element.
template <Activation A>
void MapInPlace(std::span<float> values) {
  for (float& v : values) v = ApplyActivation(A, v);
}

}  // namespace

void ApplyActivation(Activation a, std::span<float> values) {
  switch (a) {
    case Activation::kNone: return;
    case Activation::kRelu: return MapInPlace<Activation::kRelu>(values);
    case Activation::kGelu: return MapInPlace<Activation::kGelu>(values);
    case Activation::kSigmoid: return MapInPlace<Activation::kSigmoid>(values);
    case Activation::kTanh: return MapInPlace<Activation::kTanh>(values);
    case Activation::kRelu6: return MapInPlace<Activation::kRelu6>(values);
    case Activation::kElu: return MapInPlace<Activation::kElu>(values);
    case Activation::kSelu: return MapInPlace<Activation::kSelu>(values);
  }
}

}  // namespace lockstep
