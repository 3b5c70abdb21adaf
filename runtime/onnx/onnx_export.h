// A Lockstep model written out as a standard ONNX model (opset 17), so that what model-train
// trained runs in onnxruntime, Triton or any other ONNX runtime too.
//
// One signature becomes the ONNX graph: its inputs and outputs under the signature's keys,
// with their element types and shapes (a dimension the caller chooses, -1, is a dim_param:
// "batch" for the first, "<key>_<axis>" for others); the nodes it needs, translated op by op;
// the constants they read as initializers. Lockstep's image ops are NHWC and ONNX's are NCHW:
// each convolution and pool is wrapped in the two Transposes that say so, which onnxruntime's
// layout optimiser cancels between neighbours. A product run in bfloat16 (attr precision
// bfloat16, or a bf16 operand) rounds its operands through BFLOAT16 Casts, as Lockstep's bf16
// core does, and sums in float32. An op without a translation is an error naming the node and
// the op; the result is checked by ONNX's checker and shape inference before it is returned.
//
// Translated: the ops model-train's serving graphs are made of (Input, Const, Identity, Add,
// Sub, Mul, Div, BiasAdd, Normalize, the activations, Softmax, LogSoftmax, MatMul, BatchMatMul,
// Conv2D, DepthwiseConv2D, MaxPool2D, AvgPool2D, Mean, Sum, Reshape, Flatten, Transpose,
// Concat, Slice, Cast, Equal, ArgMax, Gather, BroadcastLike, LayerNormalize) and a few more
// element-wise ops (onnx_export_ops.cc's table).
#pragma once

#include <filesystem>
#include <string_view>

#include "onnx/onnx_pb.h"
#include "runtime/graph.h"
#include "runtime/status.h"

namespace lockstep {

inline constexpr int kOnnxExportOpset = 17;

// `model`'s signature `signature` as an ONNX model.
StatusOr<onnx::ModelProto> ExportOnnxModel(const Model& model, std::string_view signature = kDefaultSignature);

// The same, written to `file` (through a temporary beside it, renamed into place, so that a
// reader never sees half a file). Fails on a model of 2 GiB or more: protobuf's limit.
Status WriteOnnxModel(const Model& model, std::string_view signature, const std::filesystem::path& file);

}  // namespace lockstep
