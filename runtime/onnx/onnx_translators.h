// Internal to runtime/onnx/: the translators of the onnx_*_ops.cc files that the table in
// onnx_ops.cc lists, and helpers the files share.
#pragma once

#include <string>
#include <vector>

#include "runtime/onnx/onnx_ops.h"

namespace lockstep::onnx_import {

// A scalar of `dtype` (a numeric one) holding `value`.
Tensor Scalar(DType dtype, double value);
// The dtype of input `i` as ONNX inferred it; an error when unknown.
StatusOr<DType> InputDType(const OnnxNodeContext& ctx, size_t i);
// The permutation that swaps axis `axis` of a rank-`rank` value with the last one (its own
// inverse, so it also moves the axis back).
std::vector<int64_t> SwapWithLast(int rank, int axis);

// onnx_array_ops.cc
Status Constant(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Cast(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status CastLike(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Concat(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Reshape(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Flatten(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Unsqueeze(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Squeeze(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Transpose(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Tile(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Size(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Gather(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status ShapeOp(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status ConstantOfShape(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Slice(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Split(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// Slices of `x` along `axis` of the given sizes, or of sizes `sizes_value` holds at run time
// (`parts` of them): Split's and SplitToSequence's.
std::vector<std::string> SplitBySizes(OnnxNodeContext& ctx, const std::string& x, int64_t axis,
                                      const std::vector<int64_t>& sizes);
std::vector<std::string> SplitByRunTimeSizes(OnnxNodeContext& ctx, const std::string& x, const std::string& sizes_value,
                                             int64_t axis, int64_t parts);
Status Pad(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status StringNormalizer(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status TfIdfVectorizer(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_nn_ops.cc
Status Gemm(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status MatMul(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status BatchNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status LayerNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Softmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status LogSoftmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Hardmax(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Gelu(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_image_ops.cc
Status Resize(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Upsample(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status GridSample(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status RoiAlign(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status NonMaxSuppression(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_norm_ops.cc
Status InstanceNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status MeanVarianceNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status LpNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Lrn(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status GroupNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_signal_ops.cc
Status WindowFunction(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Dft(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Stft(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status MelWeightMatrix(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_quant_ops.cc
Status QuantizeLinear(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status DequantizeLinear(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status DynamicQuantizeLinear(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status MatMulInteger(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status QLinearMatMul(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status ConvInteger(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status QLinearConv(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status BitShift(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status BitwiseNot(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_control_flow_ops.cc
Status If(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Loop(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Scan(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_sequence_ops.cc: sequences resolved while importing (OnnxGraphSink::MakeSequence)
Status SequenceEmpty(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status SequenceConstruct(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status SequenceInsert(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status SequenceErase(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status SequenceAt(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status SequenceLength(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status SplitToSequence(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status ConcatFromSequence(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_recurrent_ops.cc: RNN, GRU, LSTM
Status Recurrent(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_window_ops.cc
Status Conv(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status ConvTranspose(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status MaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status AveragePool(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status GlobalAveragePool(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status GlobalMaxPool(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status MaxUnpool(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// `value`, of shape `dims` (one of them -1 at most), with `zeros` zeros after each element along
// `axis` and those after the last cut off (a stride's or a dilation's gaps); updates dims[axis].
std::string InsertZeros(OnnxNodeContext& ctx, std::string value, std::vector<int64_t>& dims, int axis, int64_t zeros,
                        const std::string& tag);
// onnx_attention_ops.cc: opset 23's transformer ops
Status RmsNormalization(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status RotaryEmbedding(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status Attention(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
// onnx_conv3d_ops.cc
Status Conv3D(OnnxNodeContext& ctx, std::vector<std::string>* outputs);
Status ConvTranspose3D(OnnxNodeContext& ctx, std::vector<std::string>* outputs);

}  // namespace lockstep::onnx_import
