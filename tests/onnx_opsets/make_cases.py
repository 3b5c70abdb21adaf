#!/usr/bin/python3
"""Writes the later-opset cases (opsets 18 to 23, IR versions 9 to 11) in the layout of ONNX's
backend test suite: <case>/model.onnx and <case>/test_data_set_0/input_<i>.pb, plus
<case>/inputs.json for tests/real_models/ort_run.js, which computes the expected outputs in
onnxruntime-node (prepare writes them as output_<k>.pb with write_outputs.py).

  make_cases.py OUT_DIR

Debian's python3-onnx (1.12) knows opsets up to 17: the models are written with helper's
plain constructors and any opset_import, and its checker is not run. Each case is one op's
change in a later opset (or a node whose shapes are known only at run time, checked here
against onnxruntime rather than against ourselves); inputs are float32, drawn from a seeded
generator.
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def value(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


class Case:
    def __init__(self, name, opset, ir=8):
        self.name, self.opset, self.ir = name, opset, ir
        self.nodes, self.inputs, self.outputs, self.inits, self.feeds = [], [], [], [], []

    def input(self, name, data, dims=None):
        """A float32 graph input fed `data`; `dims` (names for dimensions known only at run
        time) default to data's shape."""
        self.inputs.append(value(name, F, list(dims) if dims is not None else list(data.shape)))
        self.feeds.append((name, data.astype(np.float32)))
        return self

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(array, name))
        return self

    def init_tensor(self, tensor):
        self.inits.append(tensor)
        return self

    def node(self, op, inputs, outputs, **attrs):
        self.nodes.append(helper.make_node(op, inputs, outputs, name=f"{op.lower()}_{len(self.nodes)}", **attrs))
        return self

    def output(self, name, rank, elem=F):
        self.outputs.append(value(name, elem, [f"{name}_d{i}" for i in range(rank)]))
        return self

    def write(self, root):
        d = os.path.join(root, self.name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="lockstep-tests")
        model.ir_version = self.ir
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        feeds = {}
        for i, (name, data) in enumerate(self.feeds):
            with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(data, name).SerializeToString())
            feeds[name] = {"dims": list(data.shape), "data": [float(v) for v in data.ravel()]}
        with open(os.path.join(d, "inputs.json"), "w") as f:
            json.dump(feeds, f)
        with open(os.path.join(d, "outputs.json"), "w") as f:
            json.dump([o.name for o in self.outputs], f)


def four_bit(name, values, signed):
    """An INT4 (22) or UINT4 (21) initializer: two values to a byte, the first in the low nibble
    (python3-onnx 1.12 has no helper for them)."""
    flat = (np.asarray(values).ravel() & 0xF).astype(np.uint8)
    if len(flat) % 2:
        flat = np.append(flat, np.uint8(0))
    t = TensorProto()
    t.name = name
    t.data_type = 22 if signed else 21
    t.dims.extend(np.asarray(values).shape)
    t.raw_data = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
    return t


def cases():
    rng = np.random.default_rng(20261207)
    x = lambda *shape: rng.uniform(-2, 2, shape)
    positive = lambda *shape: rng.uniform(0.5, 2, shape)
    i64 = lambda *v: np.array(v, np.int64)
    out = []

    # Opset 18: every reduction's axes as an input.
    for op, data in [("ReduceMean", x), ("ReduceMax", x), ("ReduceMin", x), ("ReduceProd", x), ("ReduceL1", x),
                     ("ReduceL2", x), ("ReduceLogSum", positive), ("ReduceLogSumExp", x), ("ReduceSumSquare", x)]:
        out.append(Case(f"{op.lower()}_axes_input_18", 18).input("x", data(2, 3, 4)).init("axes", i64(1))
                   .node(op, ["x", "axes"], ["y"], keepdims=1).output("y", 3))
    out.append(Case("reducemax_last_axis_no_keepdims_18", 18).input("x", x(2, 3, 4)).init("axes", i64(-1))
               .node("ReduceMax", ["x", "axes"], ["y"], keepdims=0).output("y", 2))
    out.append(Case("reducemean_noop_with_empty_axes_18", 18).input("x", x(2, 3))
               .node("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1).output("y", 2))
    out.append(Case("reducemean_every_axis_18", 18).input("x", x(2, 3))
               .node("ReduceMean", ["x"], ["y"], keepdims=0).output("y", 0))
    # Opset 20: ReduceMax of booleans.
    out.append(Case("reducemax_bool_20", 20, ir=9).input("x", x(3, 4)).init("zero", np.array(0, np.float32))
               .init("axes", i64(1)).node("Greater", ["x", "zero"], ["positive"])
               .node("ReduceMax", ["positive", "axes"], ["y"], keepdims=0).output("y", 1, TensorProto.BOOL))

    # Opset 18: Split's num_outputs (the last part smaller), also of a dimension known only at run time.
    out.append(Case("split_num_outputs_uneven_18", 18).input("x", x(2, 7))
               .node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
               .output("a", 2).output("b", 2).output("c", 2))
    out.append(Case("split_num_outputs_even_18", 18).input("x", x(6, 2))
               .node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
               .output("a", 2).output("b", 2).output("c", 2))
    out.append(Case("split_num_outputs_run_time_dim_18", 18).input("x", x(2, 10), dims=["n", "m"])
               .node("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3)
               .output("a", 2).output("b", 2).output("c", 2))
    out.append(Case("split_sizes_input_18", 18).input("x", x(5, 2)).init("split", i64(2, 3))
               .node("Split", ["x", "split"], ["a", "b"], axis=0).output("a", 2).output("b", 2))

    # Opset 18: Pad's axes.
    out.append(Case("pad_axes_constant_18", 18).input("x", x(2, 3, 4)).init("pads", i64(1, 2))
               .init("value", np.array(0.5, np.float32)).init("axes", i64(2))
               .node("Pad", ["x", "pads", "value", "axes"], ["y"]).output("y", 3))
    out.append(Case("pad_negative_axes_reflect_18", 18).input("x", x(2, 3, 4)).init("pads", i64(1, 0, 2, 1))
               .init("axes", i64(-2, -1)).node("Pad", ["x", "pads", "", "axes"], ["y"], mode="reflect").output("y", 3))
    out.append(Case("pad_axes_edge_opset_19", 19, ir=9).input("x", x(1, 2, 3)).init("pads", i64(2, 1))
               .init("axes", i64(1)).node("Pad", ["x", "pads", "", "axes"], ["y"], mode="edge").output("y", 3))

    # Opset 19: Pad's wrap mode.
    out.append(Case("pad_wrap_19", 19, ir=9).input("x", x(2, 3, 4)).init("pads", i64(0, 1, 3, 0, 2, 1))
               .node("Pad", ["x", "pads"], ["y"], mode="wrap").output("y", 3))
    out.append(Case("pad_wrap_axes_19", 19, ir=9).input("x", x(2, 5), dims=["n", 5]).init("pads", i64(2, 4))
               .init("axes", i64(-1)).node("Pad", ["x", "pads", "", "axes"], ["y"], mode="wrap").output("y", 2))

    # Opset 18: Resize's axes (antialias and keep_aspect_ratio_policy at their defaults).
    out.append(Case("resize_axes_scales_linear_18", 18).input("x", x(1, 2, 4, 4))
               .init("scales", np.array([2.0, 1.5], np.float32))
               .node("Resize", ["x", "", "scales"], ["y"], mode="linear", axes=[2, 3], antialias=0,
                     keep_aspect_ratio_policy="stretch").output("y", 4))
    out.append(Case("resize_axes_sizes_nearest_18", 18).input("x", x(1, 2, 3, 5)).init("sizes", i64(7))
               .node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", axes=[-1]).output("y", 4))
    out.append(Case("resize_sizes_cubic_19", 19, ir=9).input("x", x(1, 1, 4, 4)).init("sizes", i64(1, 1, 6, 3))
               .node("Resize", ["x", "", "", "sizes"], ["y"], mode="cubic").output("y", 4))

    # Opset 18: the bitwise ops (the graph's inputs are float32: the integers are cast from them).
    ints = lambda *shape: rng.integers(-1000, 1000, shape).astype(np.float32)
    for op, dtype in [("BitwiseAnd", TensorProto.INT32), ("BitwiseOr", TensorProto.INT64),
                      ("BitwiseXor", TensorProto.INT16)]:
        out.append(Case(f"{op.lower()}_18", 18).input("a", ints(3, 4)).input("b", ints(4))
                   .node("Cast", ["a"], ["ai"], to=dtype).node("Cast", ["b"], ["bi"], to=dtype)
                   .node(op, ["ai", "bi"], ["c"]).node("Cast", ["c"], ["y"], to=TensorProto.FLOAT).output("y", 2))
    out.append(Case("bitwisenot_uint8_18", 18).input("a", rng.integers(0, 256, (3, 4)).astype(np.float32))
               .node("Cast", ["a"], ["ai"], to=TensorProto.UINT8).node("BitwiseNot", ["ai"], ["c"])
               .node("Cast", ["c"], ["y"], to=TensorProto.FLOAT).output("y", 2))

    # Opset 19: Cast's saturate; AveragePool's dilations.
    out.append(Case("cast_saturate_19", 19, ir=9).input("x", x(2, 3))
               .node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE, saturate=1).output("y", 2, TensorProto.DOUBLE))
    out.append(Case("averagepool_dilations_19", 19, ir=9).input("x", x(1, 2, 7, 7))
               .node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 2], strides=[1, 2]).output("y", 4))

    # New ops: Mish (18), Gelu (20), GroupNormalization (18: per group; 21: per channel).
    out.append(Case("mish_18", 18).input("x", x(3, 4)).node("Mish", ["x"], ["y"]).output("y", 2))
    out.append(Case("gelu_20", 20, ir=9).input("x", x(3, 4)).node("Gelu", ["x"], ["y"]).output("y", 2))
    out.append(Case("gelu_tanh_20", 20, ir=9).input("x", x(3, 4))
               .node("Gelu", ["x"], ["y"], approximate="tanh").output("y", 2))
    out.append(Case("groupnormalization_per_group_18", 18).input("x", x(2, 4, 3, 3))
               .init("scale", np.array([1.5, -0.5], np.float32)).init("bias", np.array([0.25, 1.0], np.float32))
               .node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=2, epsilon=1e-5).output("y", 4))
    out.append(Case("groupnormalization_per_channel_21", 21, ir=10).input("x", x(2, 6, 5), dims=["n", 6, "l"])
               .init("scale", rng.uniform(0.5, 1.5, 6).astype(np.float32))
               .init("bias", rng.uniform(-1, 1, 6).astype(np.float32))
               .node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=3).output("y", 3))

    # Opset 21: 4-bit weights dequantized per block, as weight-only quantized decoders carry them.
    out.append(Case("dequantizelinear_int4_blocks_matmul_21", 21, ir=10).input("a", x(3, 8))
               .init_tensor(four_bit("w", rng.integers(-8, 8, (8, 6)), signed=True))
               .init("w_scale", rng.uniform(0.01, 0.1, (2, 6)).astype(np.float32))
               .init_tensor(four_bit("w_zero", rng.integers(-2, 3, (2, 6)), signed=True))
               .node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["weights"], axis=0, block_size=4)
               .node("MatMul", ["a", "weights"], ["y"]).output("y", 2))
    out.append(Case("dequantizelinear_uint4_blocks_odd_count_21", 21, ir=10).input("a", x(2, 5))
               .init_tensor(four_bit("w", rng.integers(0, 16, (5, 3)), signed=False))
               .init("w_scale", rng.uniform(0.01, 0.1, (5, 2)).astype(np.float32))
               .node("DequantizeLinear", ["w", "w_scale"], ["weights"], axis=1, block_size=2)
               .node("MatMul", ["a", "weights"], ["y"]).output("y", 2))
    out.append(Case("quantize_dequantize_int8_blocks_21", 21, ir=10).input("x", x(4, 6))
               .init("scale", rng.uniform(0.01, 0.05, (4, 3)).astype(np.float32))
               .init("zero", rng.integers(-3, 4, (4, 3)).astype(np.int8))
               .node("QuantizeLinear", ["x", "scale", "zero"], ["q"], axis=1, block_size=2)
               .node("DequantizeLinear", ["q", "scale", "zero"], ["y"], axis=1, block_size=2).output("y", 2))

    # Opset 23's transformer ops.
    out.append(Case("rmsnormalization_23", 23, ir=11).input("x", x(2, 3, 8))
               .init("scale", rng.uniform(0.5, 1.5, 8).astype(np.float32))
               .node("RMSNormalization", ["x", "scale"], ["y"]).output("y", 3))
    out.append(Case("rmsnormalization_axis_1_23", 23, ir=11).input("x", x(2, 3, 4), dims=["b", "s", "d"])
               .init("scale", rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32))
               .node("RMSNormalization", ["x", "scale"], ["y"], axis=1, epsilon=1e-3).output("y", 3))
    angles = lambda positions, half: np.outer(np.arange(positions), 1.0 / 10000 ** (np.arange(half) / half))
    out.append(Case("rotaryembedding_4d_position_ids_23", 23, ir=11).input("x", x(1, 2, 5, 8))
               .init("cos", np.cos(angles(16, 4)).astype(np.float32)).init("sin", np.sin(angles(16, 4)).astype(np.float32))
               .init("positions", np.array([[3, 4, 5, 6, 7]], np.int64))
               .node("RotaryEmbedding", ["x", "cos", "sin", "positions"], ["y"]).output("y", 4))
    out.append(Case("rotaryembedding_3d_interleaved_partial_23", 23, ir=11).input("x", x(2, 5, 16), dims=["b", "s", 16])
               .init("cos", np.cos(angles(16, 2)).astype(np.float32)).init("sin", np.sin(angles(16, 2)).astype(np.float32))
               .init("positions", rng.integers(0, 16, (2, 5)).astype(np.int64))
               .node("RotaryEmbedding", ["x", "cos", "sin", "positions"], ["y"], interleaved=1, num_heads=2,
                     rotary_embedding_dim=4).output("y", 3))
    out.append(Case("rotaryembedding_caches_per_token_23", 23, ir=11).input("x", x(1, 2, 5, 8))
               .init("cos", np.cos(angles(5, 4)).reshape(1, 5, 4).astype(np.float32))
               .init("sin", np.sin(angles(5, 4)).reshape(1, 5, 4).astype(np.float32))
               .node("RotaryEmbedding", ["x", "cos", "sin"], ["y"]).output("y", 4))
    out.append(Case("attention_4d_23", 23, ir=11).input("q", x(1, 2, 4, 8)).input("k", x(1, 2, 6, 8))
               .input("v", x(1, 2, 6, 8)).node("Attention", ["q", "k", "v"], ["y"]).output("y", 4))
    out.append(Case("attention_causal_with_past_23", 23, ir=11).input("q", x(1, 2, 3, 8)).input("k", x(1, 2, 3, 8))
               .input("v", x(1, 2, 3, 8)).input("past_key", x(1, 2, 4, 8)).input("past_value", x(1, 2, 4, 8))
               .node("Attention", ["q", "k", "v", "", "past_key", "past_value"], ["y", "present_key", "present_value"],
                     is_causal=1)
               .output("y", 4).output("present_key", 4).output("present_value", 4))
    out.append(Case("attention_causal_more_keys_than_queries_23", 23, ir=11).input("q", x(1, 2, 3, 8))
               .input("k", x(1, 2, 5, 8)).input("v", x(1, 2, 5, 8))
               .node("Attention", ["q", "k", "v"], ["y"], is_causal=1).output("y", 4))
    out.append(Case("attention_3d_grouped_heads_bool_mask_23", 23, ir=11).input("q", x(2, 4, 32), dims=["b", "s", 32])
               .input("k", x(2, 6, 16), dims=["b", "t", 16]).input("v", x(2, 6, 16), dims=["b", "t", 16])
               .init("mask", np.concatenate([np.ones((4, 1), bool), rng.uniform(size=(4, 5)) > 0.4], axis=1))
               .node("Attention", ["q", "k", "v", "mask"], ["y"], q_num_heads=4, kv_num_heads=2, scale=0.3)
               .output("y", 3))
    out.append(Case("attention_softcap_float_mask_softmax_out_23", 23, ir=11).input("q", x(1, 2, 4, 8))
               .input("k", x(1, 2, 6, 8)).input("v", x(1, 2, 6, 8)).input("mask", x(1, 1, 4, 6))
               .node("Attention", ["q", "k", "v", "mask"], ["y", "", "", "qk"], softcap=2.0, qk_matmul_output_mode=3)
               .output("y", 4).output("qk", 4))

    # IR 10 and 11 (ONNX 1.16 to 1.18), as Triton's and current exporters' models are.
    out.append(Case("conv_relu_ir10_opset21", 21, ir=10).input("x", x(1, 2, 5, 5))
               .init("w", rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32))
               .node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]).node("Relu", ["c"], ["y"]).output("y", 4))
    out.append(Case("add_ir11_opset23", 23, ir=11).input("a", x(2, 3)).input("b", x(2, 3))
               .node("Add", ["a", "b"], ["y"]).output("y", 2))

    # Shapes known only at run time, against onnxruntime rather than against our own static path.
    dyn4 = ["n", "c", "h", "w"]
    out.append(Case("maxpool_ceil_mode_run_time_image_18", 18).input("x", x(1, 2, 6, 7), dims=dyn4)
               .node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1).output("y", 4))
    # ceil_mode where the last window would start in the end's padding: onnxruntime (as PyTorch)
    # drops it.
    out.append(Case("maxpool_ceil_mode_window_in_padding_18", 18).input("x", x(1, 1, 5, 5))
               .node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
               .output("y", 4))
    out.append(Case("averagepool_ceil_mode_window_in_padding_run_time_image_18", 18).input("x", x(1, 1, 5, 7), dims=dyn4)
               .node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
               .output("y", 4))
    out.append(Case("maxpool_valid_ceil_mode_18", 18).input("x", x(1, 1, 5, 7))
               .node("MaxPool", ["x"], ["y"], kernel_shape=[1, 2], strides=[3, 2], auto_pad="VALID", ceil_mode=1)
               .output("y", 4))
    out.append(Case("averagepool_same_lower_run_time_image_18", 18).input("x", x(2, 1, 7, 6), dims=dyn4)
               .node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER")
               .output("y", 4))
    out.append(Case("averagepool_pads_run_time_image_18", 18).input("x", x(1, 2, 5, 6), dims=dyn4)
               .node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]).output("y", 4))
    out.append(Case("conv_same_lower_run_time_image_18", 18).input("x", x(1, 2, 7, 6), dims=["n", 2, "h", "w"])
               .init("w", rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32))
               .node("Conv", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_LOWER").output("y", 4))
    out.append(Case("flatten_run_time_dims_18", 18).input("x", x(2, 3, 4, 5), dims=dyn4)
               .node("Flatten", ["x"], ["y"], axis=2).output("y", 2))
    out.append(Case("layernormalization_run_time_dims_18", 18).input("x", x(2, 3, 4), dims=["a", "b", "c"])
               .init("scale", rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32))
               .init("bias", rng.uniform(-1, 1, (3, 4)).astype(np.float32))
               .node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=1).output("y", 3))
    return out


def main():
    root = sys.argv[1]
    for case in cases():
        case.write(root)


if __name__ == "__main__":
    main()
