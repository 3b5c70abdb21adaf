#!/usr/bin/python3
"""PyTorch (Debian's python3-torch) training Fashion-MNIST as examples/fashion_mnist/{mlp,cnn,resnet,vit}.json
train it: the same architecture, per-pixel normalisation from the training set, batch 128, the
same epochs, a fresh shuffle each epoch, the last short batch kept. mlp and cnn: Adam (lr 1e-3,
TensorFlow's epsilon 1e-7). resnet (torch_train.py's ResNet): the config's recipe, SGD with
Nesterov momentum 0.9, lr 0.1, weight decay 5e-4 added to the gradient, a cosine schedule after
500 warm-up steps (model-train's formula, per step), batch norm's moving averages at momentum
0.99 (PyTorch's momentum=0.01), and the same augmentation: each image shifted by up to 2 pixels
with zeros coming in (a crop of the image padded by 2) and mirrored with probability 1/2,
before the normalisation. vit (torch_train.py's VisionTransformer): AdamW (lr 2e-3, decoupled
weight decay 0.05, epsilon 1e-7), the same cosine schedule and augmentation, label smoothing 0.1.
The data comes from the same IDX files, held in memory as tensors
(PyTorch's fastest input, no reader in the loop). Prints one JSON line: test accuracy, training
seconds and samples/s (over the epochs, excluding the first, which warms up).

  fashion_mnist_torch.py --model mlp|cnn|resnet|vit --threads T [--bf16] [--epochs E]
"""
import argparse
import gzip
import json
import math
import struct
import time

import torch
from torch import nn

from torch_train import ResNet, VisionTransformer


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = struct.unpack(">I", data[:4])[0] & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def build(model):
    if model == "vit":
        return VisionTransformer()
    if model == "resnet":
        net = ResNet()
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.momentum = 0.01  # model-train's 0.99
        return net
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn", "resnet", "vit"], default="mlp")
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
    augment = args.model in ("resnet", "vit")
    tx = (tx - mean) / std
    if not augment:
        x = (x - mean) / std
    if args.model != "mlp":
        x, tx = x.reshape(-1, 1, 28, 28), tx.reshape(-1, 1, 28, 28)
        mean, std = mean.reshape(1, 1, 28, 28), std.reshape(1, 1, 28, 28)
    net = build(args.model)
    n = x.shape[0]
    steps_per_epoch = (n + args.batch - 1) // args.batch
    if augment:
        if args.model == "resnet":
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
        else:
            optimizer = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.05, eps=1e-7)
        total_steps, warmup = args.epochs * steps_per_epoch, 500

        def factor(step):  # model-train's ScheduledLearningRate, cosine with warm-up
            progress = min(max((step - warmup) / max(total_steps - warmup - 1, 1), 0.0), 1.0)
            f = 0.5 * (1 + math.cos(math.pi * progress))
            return f * (step + 1) / warmup if step < warmup else f

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    else:
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)
        schedule = None
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1 if args.model == "vit" else 0.0)

    def shifted_and_flipped(images):  # raw images [B, 1, 28, 28]
        padded = nn.functional.pad(images, (2, 2, 2, 2))
        offsets = torch.randint(0, 5, (images.shape[0], 2))
        out = torch.stack([padded[i, :, dy:dy + 28, dx:dx + 28] for i, (dy, dx) in enumerate(offsets.tolist())])
        flip = torch.rand(images.shape[0]) < 0.5
        out[flip] = out[flip].flip(3)
        return (out - mean) / std

    timed_seconds, timed_samples, total = 0.0, 0, 0.0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(n)
        for b in range(0, n, args.batch):
            idx = order[b:b + args.batch]
            inputs = shifted_and_flipped(x[idx]) if augment else x[idx]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                loss = loss_fn(net(inputs), y[idx])
            loss.backward()
            optimizer.step()
            if schedule is not None:
                schedule.step()
        seconds = time.perf_counter() - start
        total += seconds
        if epoch > 0 or args.epochs == 1:
            timed_seconds += seconds
            timed_samples += n
    # Batch norm by its moving averages. The ViT (no dropout, no batch norm) evaluates as it
    # trains: PyTorch 1.13's fused inference path of nn.TransformerEncoderLayer, taken in eval
    # mode, fails under bf16 autocast ("expected scalar type BFloat16 but found Float").
    if args.model != "vit":
        net.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
        correct = sum((net(tx[b:b + 1000]).argmax(1) == ty[b:b + 1000]).sum().item() for b in range(0, tx.shape[0], 1000))
    print(json.dumps({"framework": "pytorch", "model": args.model, "threads": args.threads,
                      "precision": "bfloat16" if args.bf16 else "float32", "epochs": args.epochs,
                      "test_accuracy": correct / tx.shape[0], "train_seconds": round(total, 1),
                      "samples_per_s": round(timed_samples / timed_seconds)}))


if __name__ == "__main__":
    main()
