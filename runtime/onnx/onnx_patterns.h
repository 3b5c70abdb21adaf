// Patterns of several ONNX nodes that Lockstep runs as one op, recognised at the node that ends
// them by looking back along the ONNX graph. Exporters spell some layers out in primitive ops:
// PyTorch writes nn.GELU() as x * 0.5 * (1 + erf(x / sqrt 2)), nn.SiLU as x * sigmoid(x), and
// nn.LayerNorm before opset 17 as a mean, a variance and a division. Run as Gelu and LayerNormalize, they are single passes
// (and a Gelu after a matmul goes into its epilogue). The ops the pattern leaves unused are dead
// nodes that the passes remove; any of them that something else uses still runs.
//
// The fused ops compute the same function with other roundings (x * (1 / sqrt 2) for
// x / sqrt 2, one pass for the variance): equal to well within the backend suite's tolerance.
#pragma once

#include <optional>
#include <string>

#include "runtime/onnx/onnx_ops.h"

namespace lockstep::onnx_import {

// At a Mul: the ONNX name of x when the node ends 0.5 * x * (1 + erf(x / sqrt 2)) (x / sqrt 2
// also as x * (1 / sqrt 2); the three factors in any order of two Muls).
std::optional<std::string> MatchErfGelu(const OnnxNodeContext& ctx);

// At a Mul: the ONNX name of x when the node is x * Sigmoid(x) (either order): SiLU, as PyTorch
// exports nn.SiLU. Run as one Silu, it is one pass instead of two, and goes into a convolution's
// epilogue; and a layout change before it moves below it (it reads x once, not twice).
std::optional<std::string> MatchSilu(const OnnxNodeContext& ctx);

struct LayerNormMatch {
  std::string x;  // the ONNX name of the normalised value
  double epsilon = 0;
};
// At a Div: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + epsilon), both means over the last
// axis with kept dimensions, the square as Pow(d, 2) or Mul(d, d).
std::optional<LayerNormMatch> MatchLayerNorm(const OnnxNodeContext& ctx);

}  // namespace lockstep::onnx_import
