#!/usr/bin/python3
"""The python3-protobuf peer of bench_input: the same TFRecord files read the way a Python
user without TensorFlow reads them: the framing unpacked and both CRCs checked (python3-crc32c),
each record parsed into tensorflow.Example by python3-protobuf (its C++ implementation where
Debian's package has it), and the feature's values and the label taken out into a float array.
Prints one JSON line, the best of P passes.

  input_python_peer.py --features pixels [--label label] [--passes P] FILE...
"""
import argparse
import array
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import crc32c


def example_module(proto_dir):
    """tensorflow.Example's Python classes, compiled from the repository's copies of the protos."""
    out = tempfile.mkdtemp(prefix="lockstep_pb2_")
    protos = ["tensorflow/core/example/feature.proto", "tensorflow/core/example/example.proto"]
    subprocess.run(["protoc", "-I", proto_dir, "--python_out", out] + protos, check=True)
    sys.path.insert(0, out)
    from tensorflow.core.example import example_pb2  # noqa: E402
    return example_pb2


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_pass(files, example_pb2, key, label_key):
    records = 0
    size = 0
    row = array.array("f")
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            header = data[pos:pos + 12]
            length, = struct.unpack("<Q", header[:8])
            if masked(crc32c.crc32c(header[:8])) != struct.unpack("<I", header[8:12])[0]:
                raise ValueError("%s: header CRC at %d" % (path, pos))
            record = data[pos + 12:pos + 12 + length]
            if masked(crc32c.crc32c(record)) != struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0]:
                raise ValueError("%s: data CRC at %d" % (path, pos))
            pos += 16 + length
            example = example_pb2.Example.FromString(record)
            feature = example.features.feature[key]
            values = feature.float_list.value if feature.HasField("float_list") else feature.int64_list.value
            row = array.array("f", values)
            label = example.features.feature[label_key].int64_list.value[0]
            records += 1
            size += length
    return records, size, len(row), label


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", required=True)
    parser.add_argument("--label", default="label")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    example_pb2 = example_module(os.path.join(root, "proto"))
    from google.protobuf.internal import api_implementation
    best = None
    for _ in range(args.passes):
        start = time.perf_counter()
        records, size, _, _ = read_pass(args.files, example_pb2, args.features, args.label)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    print(json.dumps({"stage": "python3_protobuf_peer", "implementation": api_implementation.Type(),
                      "records": records, "records_per_s": round(records / best),
                      "mb_per_s": round(size / best / 1e6, 1)}))


if __name__ == "__main__":
    main()
