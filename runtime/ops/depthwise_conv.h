// DepthwiseConv2D's pieces shared by its forward kernels (depthwise_conv_ops.cc) and its
// gradients (depthwise_conv_grad_ops.cc).
#pragma once

#include <string_view>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/op_registry.h"
#include "runtime/ops/window.h"

namespace lockstep {

// The window of `op` (DepthwiseConv2D or one of its gradients) over `input` [N, H, W, C] with
// `filter` [KH, KW, C, M]: attrs strides and padding; the output depth is C * M.
StatusOr<Geometry> DepthwiseGeometry(std::string_view op, const AttrMap& attrs, const TensorSpec& input,
                                     const TensorSpec& filter);

// DepthwiseConv2D's gradient: DepthwiseConv2DBackpropInput(dy, filter, x) and
// DepthwiseConv2DBackpropFilter(x, dy, filter), with the forward op's attrs.
Status DepthwiseConv2DGrad(GradientBuilder& g);
void RegisterDepthwiseConvGradOps(OpRegistry& registry);

}  // namespace lockstep
