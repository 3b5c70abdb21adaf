// Registration of the standard ops, one function per family. Each family lives in its own
// file in runtime/ops/ and registers shape inference and the forward kernel together.
#pragma once

namespace lockstep {

class OpRegistry;

// Add, Sub, Mul, Div, Mod, FMod (numpy broadcasting), BiasAdd, Normalize.
void RegisterMathOps(OpRegistry& registry);
// Relu, Gelu, Sigmoid, Tanh, Relu6, Elu, Selu, Softmax, LogSoftmax.
void RegisterActivationOps(OpRegistry& registry);
// MatMul (transpose flags) and FusedMatMul (MatMul + bias + activation, made by the fusion pass).
void RegisterMatMulOps(OpRegistry& registry);
// BatchMatMul: stacks of products ([..., M, K] x [..., K, N], batch dimensions broadcast).
void RegisterBatchMatMulOps(OpRegistry& registry);
// Conv2D (NHWC, through the matmul core) and its gradients, Conv2DBackpropInput and
// Conv2DBackpropFilter.
void RegisterConvOps(OpRegistry& registry);
// DepthwiseConv2D (NHWC, each channel its own filters; direct loops, no gradient).
void RegisterDepthwiseConvOps(OpRegistry& registry);
// MaxPool2D, AvgPool2D and their gradients, MaxPool2DGrad and AvgPool2DGrad.
void RegisterPoolOps(OpRegistry& registry);
// MaxPoolWithIndices: ONNX's MaxPool with its Indices output (NCHW, 1-D to 3-D).
void RegisterPoolIndicesOps(OpRegistry& registry);
// Identity, Reshape, Flatten, Squeeze, ExpandDims, Unsqueeze and SqueezeAxes (axes an input),
// Concat, Cast, ArgMax, ArgMin, Gather (and
// GatherGrad), OneHot.
void RegisterArrayOps(OpRegistry& registry);
// Reductions (Sum, Mean) and what backward graphs are made of: SumLike, BroadcastLike,
// MeanGrad and the activations' derivatives (ReluGrad, SigmoidGrad, TanhGrad, GeluGrad,
// SoftmaxGrad, LogSoftmaxGrad).
void RegisterGradientOps(OpRegistry& registry);
// SoftmaxCrossEntropy, SigmoidCrossEntropy (fused, stable), with their gradients.
void RegisterLossOps(OpRegistry& registry);
// LayerNormalize (over the last axis) and LayerNormalizeGrad.
void RegisterLayerNormOps(OpRegistry& registry);
// BatchNormTraining (the batch's statistics, across a BatchGroup's replicas) and its gradient.
void RegisterBatchNormOps(OpRegistry& registry);
// DropoutMask: stateless, seeded by an input.
void RegisterRandomOps(OpRegistry& registry);
// ParseExampleFeature: one dense feature of serialized tf.Examples (SavedModels' parsing).
void RegisterExampleOps(OpRegistry& registry);
// Element-wise ops (the ONNX importer's targets): Sqrt, Exp, Log, Reciprocal, Floor, Ceil, Erf,
// Softplus, Softsign, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh; Neg, Abs,
// Sign (also int32, int64); LeakyRelu, HardSigmoid, HardSwish,
// ThresholdedRelu, Clip (attrs); Not. With numpy broadcasting: Pow, Minimum, Maximum; Equal,
// Less, Greater, LessEqual, GreaterEqual (bool out); And, Or, Xor; BitwiseAnd, BitwiseOr,
// BitwiseXor (integers); Where(condition, x, y).
void RegisterElementwiseOps(OpRegistry& registry);
// ONNX's shape computations: Shape, Expand, Tile, Range, ConstantOfShape, Slice, Pad; and the
// importer's arithmetic on shapes known only at run time, SplitSizes and WindowPads.
void RegisterShapeOps(OpRegistry& registry);
// Transpose (any permutation, any dtype).
void RegisterTransposeOps(OpRegistry& registry);
// Reductions Max, Min, Prod (Sum's attrs: axes, keep_dims).
void RegisterReduceOps(OpRegistry& registry);

// Trilu, EyeLike and Det: ops on the matrices of the last two axes.
void RegisterMatrixOps(OpRegistry& registry);
// GatherElements, ScatterElements, GatherND, ScatterND: gathers and scatters by index tensors.
void RegisterGatherScatterOps(OpRegistry& registry);
// NegativeLogLikelihoodLoss (ONNX's; SoftmaxCrossEntropyLoss is it after a LogSoftmax).
void RegisterNllLossOps(OpRegistry& registry);
// CumSum: running sums along an axis.
void RegisterCumSumOps(OpRegistry& registry);
// TopK, Hardmax, NonZero, Compress, Unique, ReverseSequence: picking elements by value.
void RegisterSelectOps(OpRegistry& registry);
// DepthToSpace and SpaceToDepth (NCHW).
void RegisterSpaceOps(OpRegistry& registry);
// LRN: local response normalisation across channels.
void RegisterLrnOps(OpRegistry& registry);
// Einsum: Einstein summation, any equation.
void RegisterEinsumOps(OpRegistry& registry);
// NonMaxSuppression and RoiAlign: detection post-processing and pooling.
void RegisterDetectionOps(OpRegistry& registry);
// GridSample: sampling an image at a grid of points.
void RegisterGridSampleOps(OpRegistry& registry);
// HannWindow, HammingWindow, BlackmanWindow, DFT, STFT: signal processing.
void RegisterSignalOps(OpRegistry& registry);
// RNN, GRU, LSTM: ONNX's recurrent layers.
void RegisterRecurrentOps(OpRegistry& registry);
// Resize: nearest, n-linear and n-cubic resampling of any axes (ONNX's Resize and Upsample).
void RegisterResizeOps(OpRegistry& registry);
// StringNormalizer: ONNX's stopword removal and case change of strings.
void RegisterStringOps(OpRegistry& registry);
// Cast: every dtype to every other, strings included.
void RegisterCastOps(OpRegistry& registry);
// TfIdfVectorizer: ONNX's n-gram counts of integer tokens.
void RegisterTfIdfOps(OpRegistry& registry);
// If, Loop, Scan: control flow over bodies held in attributes.
void RegisterControlFlowOps(OpRegistry& registry);

inline void RegisterStandardOps(OpRegistry& registry) {
  RegisterMathOps(registry);
  RegisterActivationOps(registry);
  RegisterMatMulOps(registry);
  RegisterBatchMatMulOps(registry);
  RegisterConvOps(registry);
  RegisterDepthwiseConvOps(registry);
  RegisterPoolOps(registry);
  RegisterPoolIndicesOps(registry);
  RegisterArrayOps(registry);
  RegisterGradientOps(registry);
  RegisterLossOps(registry);
  RegisterLayerNormOps(registry);
  RegisterBatchNormOps(registry);
  RegisterRandomOps(registry);
  RegisterExampleOps(registry);
  RegisterElementwiseOps(registry);
  RegisterShapeOps(registry);
  RegisterTransposeOps(registry);
  RegisterReduceOps(registry);
  RegisterMatrixOps(registry);
  RegisterResizeOps(registry);
  RegisterGatherScatterOps(registry);
  RegisterNllLossOps(registry);
  RegisterCumSumOps(registry);
  RegisterSelectOps(registry);
  RegisterSpaceOps(registry);
  RegisterLrnOps(registry);
  RegisterEinsumOps(registry);
  RegisterDetectionOps(registry);
  RegisterGridSampleOps(registry);
  RegisterSignalOps(registry);
  RegisterRecurrentOps(registry);
  RegisterStringOps(registry);
  RegisterControlFlowOps(registry);
  RegisterTfIdfOps(registry);
  RegisterCastOps(registry);
}

}  // namespace lockstep
