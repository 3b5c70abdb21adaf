#!/usr/bin/python3
"""Fashion-MNIST as a TensorFlow user keeps it: TFRecord shards of tf.train.Example records.

Reads the IDX files of Debian's dataset-fashion-mnist (Zalando's 60,000 training and 10,000
test images of 28x28, Expat licence: /usr/share/doc/dataset-fashion-mnist/copyright) and
writes, per record, "pixels" (784 int64 values, 0-255, row-major) and "label" (int64 class id,
0-9), framed as TFRecord (masked CRC-32C of the length and of the data), optionally compressed
as TensorFlow's compression_type "GZIP" writes them.

  examples/fashion_mnist/convert.py [--src DIR] [--out DIR] [--shards N] [--gzip]

Output: DIR/train-0000i-of-0000N.tfrecord[.gz] and DIR/test-00000-of-00001.tfrecord[.gz].
Needs python3-crc32c (Debian).
"""
import argparse
import gzip
import os
import struct

import crc32c

LABELS = ["t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
          "ankle boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def int64_feature(values):
    packed = b"".join(varint(v) for v in values)
    return field(3, field(1, packed))  # Feature.int64_list = 3, Int64List.value = 1 (packed)


def example(pixels, label):
    entries = (field(1, field(1, b"pixels") + field(2, int64_feature(pixels))) +
               field(1, field(1, b"label") + field(2, int64_feature([label]))))
    return field(1, entries)  # Example.features = 1, Features.feature = 1 (map entries)


def masked_crc(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record))


def write(path, images, labels, begin, end, compress):
    opener = gzip.open if compress else open
    with opener(path, "wb") as out:
        for i in range(begin, end):
            out.write(frame(example(images[i * 784:(i + 1) * 784], labels[i])))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    suffix = ".tfrecord.gz" if args.gzip else ".tfrecord"
    for split, shards in (("train", args.shards), ("t10k", 1)):
        shape, images = read_idx(os.path.join(args.src, split + "-images-idx3-ubyte.gz"))
        _, labels = read_idx(os.path.join(args.src, split + "-labels-idx1-ubyte.gz"))
        n = shape[0]
        name = "train" if split == "train" else "test"
        for s in range(shards):
            path = os.path.join(args.out, "%s-%05d-of-%05d%s" % (name, s, shards, suffix))
            write(path, images, labels, n * s // shards, n * (s + 1) // shards, args.gzip)
        print("%s: %d records in %d shard(s) under %s" % (name, n, shards, args.out))


if __name__ == "__main__":
    main()
