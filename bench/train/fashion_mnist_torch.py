#!/usr/bin/python3
"""PyTorch (Debian's python3-torch) training Fashion-MNIST as examples/fashion_mnist/{mlp,cnn}.json
train it: the same architecture, per-pixel normalisation from the training set, Adam (lr 1e-3,
TensorFlow's epsilon 1e-7), batch 128, the same epochs, a fresh shuffle each epoch, the last
short batch kept. The data comes from the same IDX files, held in memory as tensors (PyTorch's
fastest input, no reader in the loop). Prints one JSON line: test accuracy, training seconds
and samples/s (over the epochs, excluding the first, which warms up).

  fashion_mnist_torch.py --model mlp|cnn --threads T [--bf16] [--epochs E]
"""
import argparse
import gzip
import json
import struct
import time

import torch
from torch import nn


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = struct.unpack(">I", data[:4])[0] & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def build(model):
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = read_idx(args.src + "/train-images-idx3-ubyte.gz").float().reshape(-1, 784)
    y = read_idx(args.src + "/train-labels-idx1-ubyte.gz").long()
    tx = read_idx(args.src + "/t10k-images-idx3-ubyte.gz").float().reshape(-1, 784)
    ty = read_idx(args.src + "/t10k-labels-idx1-ubyte.gz").long()
    mean, std = x.mean(0), x.std(0, unbiased=False)
    std[std == 0] = 1
    x, tx = (x - mean) / std, (tx - mean) / std
    if args.model == "cnn":
        x, tx = x.reshape(-1, 1, 28, 28), tx.reshape(-1, 1, 28, 28)
    net = build(args.model)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    n = x.shape[0]
    timed_seconds, timed_samples, total = 0.0, 0, 0.0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(n)
        for b in range(0, n, args.batch):
            idx = order[b:b + args.batch]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                loss = loss_fn(net(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
        seconds = time.perf_counter() - start
        total += seconds
        if epoch > 0 or args.epochs == 1:
            timed_seconds += seconds
            timed_samples += n
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
        correct = (net(tx).argmax(1) == ty).sum().item()
    print(json.dumps({"framework": "pytorch", "model": args.model, "threads": args.threads,
                      "precision": "bfloat16" if args.bf16 else "float32", "epochs": args.epochs,
                      "test_accuracy": correct / tx.shape[0], "train_seconds": round(total, 1),
                      "samples_per_s": round(timed_samples / timed_seconds)}))


if __name__ == "__main__":
    main()
