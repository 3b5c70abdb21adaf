#!/usr/bin/python3
"""PyTorch's training throughput on the models bench_train measures, as the peer in the same run.

The same models, batch sizes, optimiser (Adam, lr 1e-3), loss (cross-entropy on the logits) and
synthetic data as bench/train/train_bench.cc; intra-op threads set with torch.set_num_threads;
with --autocast, the forward pass runs under torch.autocast("cpu", dtype=torch.bfloat16), the
way a PyTorch user trains in bf16 mixed precision on a CPU. Timing as bench_train's: a warm-up,
then W windows, the median window's rate. Prints one JSON line.

  torch_train.py --model mlp|cnn|vit|resnet --threads T [--autocast] [--batch B] [--seconds S] [--windows W]
"""
import argparse
import json
import statistics
import time

import torch
from torch import nn


class VisionTransformer(nn.Module):
    """examples/fashion_mnist/vit.json's model: 4x4 patches to 64, learned positions, three
    pre-norm encoder layers (4 heads, GELU feed-forward 128), a final layer norm, mean pooling."""

    def __init__(self):
        super().__init__()
        self.patches = nn.Conv2d(1, 64, 4, stride=4)
        self.positions = nn.Parameter(torch.zeros(1, 49, 64))
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(64)
        self.classes = nn.Linear(64, 10)

    def forward(self, x):
        tokens = self.patches(x).flatten(2).transpose(1, 2) + self.positions
        return self.classes(self.norm(self.encoder(tokens)).mean(dim=1))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions without biases, each with batch norm, the input added back; a strided
    1x1 convolution with batch norm where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """examples/fashion_mnist/resnet.json's model: a 3x3 stem of 16 with batch norm, three stages
    of two BasicBlocks (16, 32, 64 channels; the second and third halve the image), global
    average pooling, a dense layer to the classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        blocks, cin = [], 16
        for stage, width in enumerate((16, 32, 64)):
            for b in range(2):
                blocks.append(BasicBlock(cin, width, 2 if stage > 0 and b == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.classes = nn.Linear(64, 10)

    def forward(self, x):
        return self.classes(self.blocks(self.stem(x)).mean(dim=(2, 3)))


def build(model):
    if model == "vit":
        return VisionTransformer(), (1, 28, 28)
    if model == "resnet":
        return ResNet(), (1, 28, 28)
    if model == "mlp":
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 10)), (784,)
    # The digits CNN (NCHW here; bench_train is NHWC): Conv2D(32, 3, same, relu), MaxPool2D(2),
    # Flatten, Dense(10).
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 10)), (1, 8, 8)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn", "vit", "resnet"], default="mlp")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--autocast", action="store_true")
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--windows", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    batch = args.batch or {"mlp": 256, "cnn": 32, "vit": 128, "resnet": 128}[args.model]
    net, shape = build(args.model)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand((batch,) + shape)
    y = torch.randint(0, 10, (batch,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        if args.autocast:
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                loss = loss_fn(net(x), y)
        else:
            loss = loss_fn(net(x), y)
        loss.backward()
        optimizer.step()
        return loss

    window = args.seconds / args.windows
    warm_until = time.perf_counter() + window / 5
    for i in range(3):
        step()
    while time.perf_counter() < warm_until:
        step()
    rates = []
    for _ in range(args.windows):
        begin = time.perf_counter()
        n = 0
        while time.perf_counter() - begin < window:
            loss = step()
            n += 1
        rates.append(n * batch / (time.perf_counter() - begin))
    print(json.dumps({"framework": "pytorch", "model": args.model,
                      "precision": "bfloat16" if args.autocast else "float32", "threads": args.threads,
                      "batch": batch, "samples_per_s": round(statistics.median(rates), 1),
                      "loss": round(float(loss), 4), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
