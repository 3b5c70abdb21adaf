#!/usr/bin/env python3
"""Writes the binary seeds of tests/fuzz/corpus/ (the text seeds are written by hand).

  tests/fuzz/make_seeds.py [BUNDLE_DIR ...]

tensor_proto: PredictRequest and ClassificationRequest texts encoded by protoc.
v2_infer_grpc: Open Inference Protocol ModelInferRequest texts encoded by protoc.
tfrecord_example: TFRecord files of tf.train.Example records encoded by protoc.
bundle_reader: each BUNDLE_DIR (model-cli make-example, model-train exports) in the target's
input form: uint32 little-endian size of model.pb, model.pb, weights.bin.
saved_model: each SavedModel of tests/data/tf_saved_models/ in the target's input form (sizes
and bytes of saved_model.pb and variables.index, then variables.data), and tf.Examples.
onnx_model: model.onnx files and one test input of the ONNX backend test suite (Debian's
libonnx-testdata, MIT licence, see tests/fuzz/README.md), one per op family the importer reads.
"""
import gzip
import pathlib
import struct
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def encode(message_type, proto_file, text):
    return subprocess.run(["protoc", f"--encode={message_type}", f"-I{ROOT / 'proto'}", proto_file],
                          input=text.encode(), capture_output=True, check=True).stdout


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(records):
    out = b""
    for r in records:
        length = struct.pack("<Q", len(r))
        out += length + struct.pack("<I", masked_crc(length)) + r + struct.pack("<I", masked_crc(r))
    return out


PREDICT = {
    "floats": 'model_spec { name: "m" } inputs { key: "x" value { dtype: DT_FLOAT tensor_shape { dim { size: 2 } '
              'dim { size: 3 } } float_val: [1, 2, 3, 4, 5.5, -6] } }',
    "content": 'inputs { key: "x" value { dtype: DT_FLOAT tensor_shape { dim { size: 1 } dim { size: 2 } } '
               'tensor_content: "\\000\\000\\200?\\000\\000\\000@" } }',
    "splat": 'inputs { key: "x" value { dtype: DT_INT32 tensor_shape { dim { size: 4 } dim { size: 3 } } int_val: 7 } }',
    "several": 'model_spec { name: "m" signature_name: "s" version { value: 2 } } '
               'inputs { key: "a" value { dtype: DT_INT64 tensor_shape { dim { size: 2 } } int64_val: [1, -9] } } '
               'inputs { key: "s" value { dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: ["ab", "\\377"] } } '
               'inputs { key: "b" value { dtype: DT_BOOL tensor_shape { dim { size: 1 } } bool_val: true } } '
               'inputs { key: "h" value { dtype: DT_BFLOAT16 tensor_shape { dim { size: 2 } } half_val: [16256, 49024] } } '
               'output_filter: "y"',
    "scalar_double": 'inputs { key: "d" value { dtype: DT_DOUBLE tensor_shape { } double_val: 1.5 } }',
}
CLASSIFY = {
    "examples": 'model_spec { name: "m" } input { example_list { examples { features { '
                'feature { key: "x" value { float_list { value: [1, 2, 3] } } } '
                'feature { key: "n" value { int64_list { value: 4 } } } '
                'feature { key: "s" value { bytes_list { value: "a" } } } } } } }',
    "context": 'input { example_list_with_context { context { features { feature { key: "n" value { '
               'int64_list { value: 1 } } } } } examples { features { feature { key: "x" value { '
               'float_list { value: [0.5, 0, -1] } } } feature { key: "s" value { bytes_list { value: "" } } } } } } }',
}
EXAMPLES = [
    'features { feature { key: "x" value { float_list { value: [0.5, 1] } } } '
    'feature { key: "y" value { int64_list { value: 3 } } } feature { key: "label" value { int64_list { value: 1 } } } }',
    'features { feature { key: "x" value { float_list { value: [2, -1] } } } '
    'feature { key: "y" value { int64_list { value: 0 } } } feature { key: "label" value { int64_list { value: 0 } } } }',
    'features { feature { key: "x" value { int64_list { value: [7, 8] } } } '
    'feature { key: "y" value { float_list { value: 1 } } } feature { key: "label" value { bytes_list { value: "cat" } } } }',
]


def main():
    tp = CORPUS / "tensor_proto"
    tp.mkdir(parents=True, exist_ok=True)
    for name, text in PREDICT.items():
        (tp / f"predict_{name}").write_bytes(
            encode("tensorflow.serving.PredictRequest", "tensorflow_serving/apis/predict.proto", text))
    for name, text in CLASSIFY.items():
        (tp / f"classify_{name}").write_bytes(
            encode("tensorflow.serving.ClassificationRequest", "tensorflow_serving/apis/classification.proto", text))

    v2 = CORPUS / "v2_infer_grpc"
    v2.mkdir(parents=True, exist_ok=True)
    for name, text in MODEL_INFER.items():
        (v2 / name).write_bytes(encode("inference.ModelInferRequest", "inference/grpc_service.proto", text))

    tf = CORPUS / "tfrecord_example"
    tf.mkdir(parents=True, exist_ok=True)
    records = [encode("tensorflow.Example", "tensorflow/core/example/example.proto", t) for t in EXAMPLES]
    # The first byte is the target's mode (fuzz_targets.h): 0 strict, 2 one feature "x", 5 lenient with label "y";
    # 8 the streaming input (16: with a prefetch thread); 32 regression, the label key's values the targets.
    # Files may be gzip-compressed.
    (tf / "ids").write_bytes(b"\x00" + tfrecord(records[:2]))
    (tf / "one_feature").write_bytes(b"\x02" + tfrecord(records[:2]))
    (tf / "names_lenient").write_bytes(b"\x05" + tfrecord(records))
    (tf / "ids_streamed").write_bytes(b"\x08" + tfrecord(records[:2]))
    (tf / "names_streamed_prefetch").write_bytes(b"\x1d" + tfrecord(records))
    (tf / "ids_gzip").write_bytes(b"\x00" + gzip.compress(tfrecord(records[:2]), mtime=0))
    (tf / "targets").write_bytes(b"\x22" + tfrecord(records[:2]))
    (tf / "targets_y_streamed").write_bytes(b"\x2e" + tfrecord(records))
    (tf / "ids_gzip_streamed").write_bytes(b"\x08" + gzip.compress(tfrecord(records[:2]), mtime=0))

    br = CORPUS / "bundle_reader"
    br.mkdir(parents=True, exist_ok=True)
    for bundle in sys.argv[1:]:
        bundle = pathlib.Path(bundle)
        graph = (bundle / "model.pb").read_bytes()
        weights = (bundle / "weights.bin").read_bytes()
        (br / bundle.parent.name).write_bytes(struct.pack("<I", len(graph)) + graph + weights)

    sm = CORPUS / "saved_model"
    sm.mkdir(parents=True, exist_ok=True)
    for version in sorted((ROOT / "tests" / "data" / "tf_saved_models").glob("*/*/saved_model.pb")):
        version = version.parent
        pb = (version / "saved_model.pb").read_bytes()
        index = (version / "variables" / "variables.index").read_bytes()
        data = (version / "variables" / "variables.data-00000-of-00001").read_bytes()
        name = f"{version.parent.name}_{version.name}"
        (sm / name).write_bytes(struct.pack("<I", len(pb)) + pb + struct.pack("<I", len(index)) + index + data)
    for i, record in enumerate(records):
        (sm / f"example_{i}").write_bytes(record)

    om = CORPUS / "onnx_model"
    om.mkdir(parents=True, exist_ok=True)
    suite = pathlib.Path("/usr/share/libonnx-testdata/data")
    for case in ONNX_CASES:
        (om / case.split("/")[-1]).write_bytes((suite / case / "model.onnx").read_bytes())
    (om / "tensor_input").write_bytes((suite / "node/test_gemm_default_vector_bias/test_data_set_0/input_0.pb").read_bytes())


# ModelInferRequests: typed contents of each kind, raw contents (BF16 and BYTES), a parameter.
MODEL_INFER = {
    "fp32_contents": 'model_name: "m" id: "1" inputs { name: "x" datatype: "FP32" shape: 2 '
                     'contents { fp32_contents: 1.5 fp32_contents: -2 } }',
    "int_contents": 'inputs { name: "x" datatype: "INT32" shape: 2 contents { int_contents: 7 int_contents: -8 } }',
    "two_inputs": 'parameters { key: "signature_name" value { string_param: "two" } } '
                  'inputs { name: "a" datatype: "FP32" shape: 1 shape: 2 contents { fp32_contents: 1 fp32_contents: 2 } } '
                  'inputs { name: "b" datatype: "BYTES" shape: 1 contents { bytes_contents: "s" } } '
                  'outputs { name: "a" }',
    "bool_contents": 'inputs { name: "x" datatype: "BOOL" shape: 3 contents { bool_contents: true bool_contents: false '
                     'bool_contents: true } }',
    "raw_bf16": 'inputs { name: "x" datatype: "BF16" shape: 2 } raw_input_contents: "\\x80\\x3f\\x00\\xc0"',
    "raw_bytes": 'inputs { name: "x" datatype: "BYTES" shape: 2 } '
                 'raw_input_contents: "\\x02\\x00\\x00\\x00ab\\x00\\x00\\x00\\x00"',
    "raw_count_mismatch": 'inputs { name: "x" datatype: "INT64" shape: 2 } raw_input_contents: "\\x01\\x00"',
}


# One case per family of ops the ONNX importer translates.
ONNX_CASES = [
    "node/test_gemm_default_vector_bias", "node/test_matmul_2d", "node/test_conv_with_strides_padding",
    "node/test_batchnorm_example", "node/test_maxpool_2d_pads", "node/test_averagepool_2d_same_upper",
    "node/test_softmax_axis_0", "node/test_reshape_reordered_all_dims", "node/test_slice_neg_steps",
    "node/test_gather_1", "node/test_unsqueeze_two_axes", "node/test_constantofshape_int_zeros",
    "node/test_layer_normalization_4d_axis_negative_1", "node/test_where_long_example", "node/test_constant_pad",
    "node/test_reduce_mean_keepdims_example", "node/test_split_equal_parts_1d", "node/test_clip_default_min",
    "pytorch-converted/test_Conv2d_depthwise", "pytorch-operator/test_operator_view",
]


if __name__ == "__main__":
    main()
