#!/usr/bin/python3
"""Exports PyTorch models to ONNX (opset 14) for the ONNX bench and for the test suite.

Run with Debian's Python (python3-torch, python3-onnx, python3-numpy):

  /usr/bin/python3 bench/onnx/export_models.py --bench OUTDIR [--batches 1,32] [--seq 128]
      OUTDIR/{mlp,cnn,transformer}/model.onnx, OUTDIR/models.json, and per batch a shared
      random input (OUTDIR/<model>/input_b<batch>.f32, raw float32) with PyTorch's output on it
      (OUTDIR/<model>/torch_b<batch>.f32), which bench/onnx/run_onnx_bench.sh feeds to both
      runtimes and cross-checks against; models.json also gives each model's product FLOPs per
      batch (PyTorch's profiler count of its matmuls and convolutions).

  /usr/bin/python3 bench/onnx/export_models.py --tests OUTDIR
      small models in the ONNX backend test-suite layout: OUTDIR/<name>/model.onnx and
      OUTDIR/<name>/test_data_set_<k>/{input,output}_<i>.pb (onnx.TensorProto), the expected
      outputs being PyTorch's own (model(x) in float32).

Everything is deterministic: fixed seeds, eval mode, dropout 0.
"""
import argparse
import json
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

OPSET = 14


# ---------------------------------------------------------------------------------------------
# Bench models


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


class BenchCnn(nn.Module):
    """ResNet-style for 3x32x32: stem 32ch, stages 32/64/128 of one BasicBlock each."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.stages = nn.Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 128, 2))
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        y = self.stages(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Encoder(nn.Module):
    """Embedding-free transformer encoder on float input [batch, seq, d], Linear to 10 per position."""

    def __init__(self, d_model, nhead, ff, layers=2, classes=10):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=ff, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x):
        return self.head(self.encoder(x))


def randomize_bn(model, gen):
    """Non-trivial BatchNorm statistics, so that folding them is actually tested."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


# The products: what a matmul core or convolution runs. Elementwise ops are left out of the count.
PRODUCT_OPS = {"aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::conv1d",
               "aten::conv2d", "aten::convolution", "aten::linear"}


def with_random_bn(model, gen):
    randomize_bn(model, gen)
    return model


def product_flops(model, x):
    """Floating-point operations of the model's products on x (2 per multiply-add), as PyTorch's
    profiler counts them; with the measured peak this says how close to the machine a runtime is."""
    return product_flops_of(model, [torch.from_numpy(x)])


def product_flops_of(model, tensors):
    """product_flops for a model of several inputs (torch tensors)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True) as prof:
        model(*tensors)
    return int(sum(e.flops for e in prof.key_averages() if e.key in PRODUCT_OPS and e.flops))


def reference(model, x):
    """PyTorch's output on x: the same (non-fused) path as the export traced."""
    return model(torch.from_numpy(x)).detach().numpy().astype(np.float32)


def export(model, example, path, dynamic_axes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model.eval()
    # Not under no_grad: in eval mode without autograd, nn.TransformerEncoderLayer takes its fused
    # fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
    torch.onnx.export(model, (example,), path, opset_version=OPSET, do_constant_folding=True,
                      input_names=["x"], output_names=["y"], dynamic_axes=dynamic_axes)
    onnx.checker.check_model(onnx.load(path))


def bench_models():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    cnn = BenchCnn()
    randomize_bn(cnn, gen)
    transformer = Encoder(256, 4, 1024)
    return {
        # name: (model, input shape with batch first, dynamic axes)
        "mlp": (mlp, [784], {"x": {0: "batch"}, "y": {0: "batch"}}),
        "cnn": (cnn, [3, 32, 32], {"x": {0: "batch"}, "y": {0: "batch"}}),
        "transformer": (transformer, ["seq", 256],
                        {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}),
    }


def write_bench(outdir, batches, seq):
    listing = []
    rng = np.random.default_rng(1234)
    for name, (model, tail, axes) in bench_models().items():
        model.eval()
        tail = [seq if d == "seq" else d for d in tail]
        path = os.path.join(outdir, name, "model.onnx")
        export(model, torch.zeros([2] + tail), path, axes)
        shapes, flops = {}, {}
        for batch in batches:
            shape = [batch] + tail
            x = rng.standard_normal(shape).astype(np.float32)
            x.tofile(os.path.join(outdir, name, f"input_b{batch}.f32"))
            y = reference(model, x)
            y.tofile(os.path.join(outdir, name, f"torch_b{batch}.f32"))
            shapes[str(batch)] = shape
            flops[str(batch)] = product_flops(model, x)
        listing.append({"name": name, "model": f"{name}/model.onnx", "input": "x", "outputs": ["y"],
                        "shapes": shapes, "product_flops": flops})
    with open(os.path.join(outdir, "models.json"), "w") as f:
        json.dump({"torch": torch.__version__, "opset": OPSET, "models": listing}, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------------------
# Test-suite models


class TestCnn(nn.Module):
    """conv+BN+ReLU, depthwise conv, maxpool, a residual block, adaptive avg pool, linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = nn.MaxPool2d(2)
        self.block = BasicBlock(8, 16, 2)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = self.pool(torch.relu(self.depthwise(y)))
        y = self.block(y)
        y = torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1)
        return self.fc(y)


class ResidualGelu(nn.Module):
    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.fc2(nn.functional.gelu(self.fc1(x))))


class MobileBlock(nn.Module):
    """MobileNetV3's and EfficientNet's pieces: a strided stem with HardSwish, an inverted residual
    block (1x1 expand, depthwise, squeeze-and-excitation, 1x1 project, skip) with SiLU, a 1x1 head
    with HardSwish, global average pool, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.depthwise = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16),
                                       nn.SiLU())
        self.squeeze = nn.Conv2d(16, 4, 1)
        self.excite = nn.Conv2d(4, 16, 1)
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Sequential(nn.Conv2d(8, 24, 1), nn.Hardswish())
        self.fc = nn.Linear(24, 5)

    def forward(self, x):
        x = self.stem(x)
        y = self.depthwise(self.expand(x))
        s = nn.functional.adaptive_avg_pool2d(y, 1)
        s = torch.sigmoid(self.excite(nn.functional.silu(self.squeeze(s))))
        y = x + self.project(y * s)
        y = self.head(y)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def test_models():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    cnn = TestCnn()
    randomize_bn(cnn, gen)
    batch_sets = [[1], [3], [7]]
    return {
        # name: (model, input shape tail, dynamic axes, [leading dims of each data set])
        "mlp": (nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)), [20],
                {"x": {0: "batch"}, "y": {0: "batch"}}, batch_sets),
        "cnn": (cnn, [3, 16, 16], {"x": {0: "batch"}, "y": {0: "batch"}}, batch_sets),
        "residual_gelu": (ResidualGelu(), [16], {"x": {0: "batch"}, "y": {0: "batch"}}, batch_sets),
        "transformer": (Encoder(32, 4, 64, classes=5), [32],
                        {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                        [[1, 5], [3, 9], [2, 17]]),
        "mobile_block": (with_random_bn(MobileBlock(), gen), [3, 16, 16], {"x": {0: "batch"}, "y": {0: "batch"}}, batch_sets),
    }


def write_tests(outdir):
    rng = np.random.default_rng(2024)
    for name, (model, tail, axes, sets) in test_models().items():
        model.eval()
        path = os.path.join(outdir, name, "model.onnx")
        export(model, torch.zeros(sets[-1] + tail), path, axes)
        graph = onnx.load(path).graph
        initializers = {i.name for i in graph.initializer}
        input_names = [i.name for i in graph.input if i.name not in initializers]
        output_names = [o.name for o in graph.output]
        for k, lead in enumerate(sets):
            x = rng.standard_normal(lead + tail).astype(np.float32)
            y = reference(model, x)
            data_dir = os.path.join(outdir, name, f"test_data_set_{k}")
            os.makedirs(data_dir, exist_ok=True)
            for i, (value, tensor_name) in enumerate([(x, input_names[0])]):
                with open(os.path.join(data_dir, f"input_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(value, tensor_name).SerializeToString())
            for j, (value, tensor_name) in enumerate([(y, output_names[0])]):
                with open(os.path.join(data_dir, f"output_{j}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(value, tensor_name).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--bench", metavar="OUTDIR")
    mode.add_argument("--tests", metavar="OUTDIR")
    parser.add_argument("--batches", default="1,32", help="bench: batch sizes of the input files")
    parser.add_argument("--seq", type=int, default=128, help="bench: the transformer's sequence length")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.bench:
        write_bench(args.bench, [int(b) for b in args.batches.split(",")], args.seq)
    else:
        write_tests(args.tests)


if __name__ == "__main__":
    main()
