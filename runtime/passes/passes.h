// Graph passes. Each takes a valid Model and leaves a valid Model computing the same values
// for every signature output, bit for bit: they only ever run the same kernels in another
// arrangement.
#pragma once

#include "runtime/graph.h"
#include "runtime/op_registry.h"

namespace lockstep {

// Evaluates every deterministic node whose inputs are all constants (Const, or Variable:
// a compiled session treats variables as frozen) and replaces it by a Const of the result.
// A Shape whose input's shape inference knows exactly (and no signature feeds with any shape)
// is constant too, and a Reshape given a constant target takes it as its attr: so a model
// exported with static shapes loses its whole shape computation (Shape -> Gather -> Concat ->
// Reshape) at load.
Status FoldConstants(Model& model, ThreadPool& pool, const OpRegistry& registry = OpRegistry::Global());

// Runs single-output `op` on constant inputs, as folding does: ResourceExhausted, before any
// allocation, for an output of more than `max_elements` elements (a Range or ConstantOfShape
// whose size only its inputs' values tell).
StatusOr<Tensor> EvaluateConstantOp(const OpDef& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                                    ThreadPool& pool, int64_t max_elements);

// Rewrites MatMul -> BiasAdd -> activation (each link optional but the MatMul, and at least
// one of the others) into one FusedMatMul, and a float32 Conv2D -> BiasAdd -> (Add of a value of
// the output's shape: a skip connection) -> activation into one FusedConv2D, and a float32
// DepthwiseConv2D -> BiasAdd -> activation into one FusedDepthwiseConv2D, when the intermediate
// values feed nothing else.
Status FuseMatMul(Model& model, const OpRegistry& registry = OpRegistry::Global());

// Rewrites LayerNormalize -> Mul by a float32 row [d] (a model's scale) -> optionally Add of
// another (its offset) into one LayerNormalize(x, scale[, offset]), when the intermediate values
// feed nothing else: one pass over the rows instead of three, the same bits.
Status FuseLayerNormScaleOffset(Model& model, const OpRegistry& registry = OpRegistry::Global());

// Moves layout changes (Transpose, Reshape) below element-wise ops, Pad, bias additions and
// reductions (Mean, Sum, Max, Min over attr axes), and composes those that meet, dropping
// Transposes that cancel (layout_sinking.cc): the Transpose pairs an NCHW model's importer puts
// around each NHWC convolution vanish between two convolutions and around a global pooling,
// and a sequence's dense layer gets its bias and activation next to its matmul, where
// FuseMatMul finds them. Then a Transpose that moves only dimensions of size 1 becomes a
// Reshape. Never adds a copy. Exact but for a Mean or Sum moved below a Transpose, which adds
// its terms in another order.
Status SinkLayoutChanges(Model& model, const OpRegistry& registry = OpRegistry::Global());

// Removes nodes that no signature needs and weights no node refers to.
Status EliminateDeadNodes(Model& model, const OpRegistry& registry = OpRegistry::Global());

// All of the above, in the order that lets each help the next.
Status OptimizeGraph(Model& model, ThreadPool& pool, const OpRegistry& registry = OpRegistry::Global());

// The one pass that changes values, run only when asked (SessionOptions::bf16_products): every
// float32 MatMul, FusedMatMul, BatchMatMul (attention's), Conv2D, FusedConv2D and
// Conv2DTranspose that does not choose its precision computes in bfloat16 on the matmul core
// (each operand rounded to bf16, float32 sums), as mixed-precision training does; except that
// a 3x3 convolution that runs as Winograd in float32 rounds the transformed tiles instead (attr
// bf16_winograd: faster, and no further from float32). Constant weights are then packed as bf16
// once. Depthwise convolutions stay float32.
Status UseBf16Products(Model& model, const OpRegistry& registry = OpRegistry::Global());

}  // namespace lockstep
