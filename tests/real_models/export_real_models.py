#!/usr/bin/python3
"""Exports the real-model suite: architectures no one here wrote, as a user brings them.

Run with Debian's Python (python3-torch, python3-torchvision, python3-onnx):

  /usr/bin/python3 tests/real_models/export_real_models.py OUTDIR [--only a,b] [--list] [--set ci|all]

For each model, OUTDIR/<name>/model.onnx (torch.onnx.export, batch dynamic) beside
OUTDIR/<name>/test_data_set_0/{input_<i>.pb,output_<k>.pb} (onnx.TensorProto: a seeded input and
PyTorch's own answer on it, in float32), the layout of ONNX's backend test suite; and
OUTDIR/<name>/info.json (source, opset, input shapes). Random weights, with non-trivial
BatchNorm statistics, eval mode; everything seeded, so two runs write the same files.

The set 'ci' is what the test suite runs (tests/e2e/real_models_test.cc); 'all' adds the large
models that only the benchmark runs (ResNet-50, ViT-B/16, ConvNeXt-T...), which cost minutes
each to export and seconds each to run in a sanitizer build.
"""
import argparse
import json
import math
import os

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper
from torch import nn


def randomize_norms(model, gen):
    """Non-trivial BatchNorm statistics, so that folding them is actually tested; and random
    weights for the layers torchvision initialises to zeros (ViT's head), whose all-zero answer
    any runtime would match."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)) and not m.weight.detach().any():
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.02)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.02)
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


# ---------------------------------------------------------------------------------------------
# Transformers written here: the patterns BERT- and GPT-style exports hold.


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, bias):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads) + bias
        y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d, heads, ff, pre_norm):
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = Attention(d, heads)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x, bias):
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), bias)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.attn(x, bias))
        return self.ln2(x + self.ff(x))


class BertStyle(nn.Module):
    """Token, position and segment embeddings; padding mask as an input; post-norm blocks;
    a pooled [CLS] head."""

    def __init__(self, vocab=1000, d=128, heads=4, ff=512, layers=2, max_len=256, classes=3):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.seg = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.ModuleList([Block(d, heads, ff, pre_norm=False) for _ in range(layers)])
        self.pool = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(positions) + self.seg(token_type_ids))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for block in self.blocks:
            x = block(x, bias)
        return self.head(torch.tanh(self.pool(x[:, 0])))


class GptStyle(nn.Module):
    """Token and learned position embeddings, a causal mask built in the graph with torch.triu,
    pre-norm blocks, a final LayerNorm and the logits over the vocabulary (tied weights)."""

    def __init__(self, vocab=1000, d=128, heads=4, ff=512, layers=2, max_len=256):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList([Block(d, heads, ff, pre_norm=True) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        positions = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.tok(input_ids) + self.pos(positions)
        causal = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        for block in self.blocks:
            x = block(x, causal)
        return self.ln(x) @ self.tok.weight.t()


class GreedyDecoder(nn.Module):
    """A recurrent decoder that feeds back its own arg max for a number of steps given at run
    time, and stops early once every row has emitted the end token; a finished row scores 0.
    Exported through torch.jit.script, as search loops are: a Loop with a trip count and a
    condition, Ifs inside it, and a carried value that grows each step (the scores)."""

    def __init__(self, vocab: int = 64, d: int = 48, eos: int = 52):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.wx = nn.Linear(d, d)
        self.wh = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab)
        self.eos = eos

    def forward(self, h0: torch.Tensor, first_token: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        h = h0
        tok = first_token
        scores = torch.zeros(h0.shape[0], 0)
        done = torch.zeros(h0.shape[0], dtype=torch.bool)
        i = 0
        while i < int(steps) and not bool(done.all()):
            h = torch.tanh(self.wx(self.emb(tok)) + self.wh(h))
            best = self.out(h).max(-1)
            if bool(done.any()):
                picked = torch.where(done, torch.zeros_like(best.values), best.values)
            else:
                picked = best.values
            scores = torch.cat([scores, picked.unsqueeze(1)], 1)
            tok = best.indices
            done = done | (tok == self.eos)
            i += 1
        return scores


# ---------------------------------------------------------------------------------------------
# The list: name -> (constructor, opset, inputs [(name, shape, kind)], output names, set)
# kind: "image" (float, standard normal), "ids:N" (int64 in [0, N)), "count:N" (an int64 scalar N), "mask" (int64 ones with the
# last quarter of the second row zero), "zeros" (int64 zeros).

tv = torchvision.models
seg = torchvision.models.segmentation


def image(size, batch=2):
    return [("x", [batch, 3, size, size], "image")]


MODELS = {
    # classification zoo, one of each family, at the smallest input it takes
    "alexnet": (lambda: tv.alexnet(), 11, image(224, batch=1), ["y"], "all"),
    "resnet18": (lambda: tv.resnet18(), 12, image(64), ["y"], "ci"),
    "resnext50_32x4d": (lambda: tv.resnext50_32x4d(), 13, image(64), ["y"], "all"),
    "wide_resnet50_2": (lambda: tv.wide_resnet50_2(), 17, image(64), ["y"], "all"),
    "resnet50": (lambda: tv.resnet50(), 17, image(224), ["y"], "all"),
    "squeezenet1_1": (lambda: tv.squeezenet1_1(), 12, image(64), ["y"], "ci"),
    "densenet121": (lambda: tv.densenet121(), 13, image(64), ["y"], "ci"),
    "googlenet": (lambda: tv.googlenet(aux_logits=False, init_weights=True), 14, image(64), ["y"], "ci"),
    "inception_v3": (lambda: tv.inception_v3(aux_logits=False, init_weights=True), 15, image(96), ["y"], "ci"),
    "mobilenet_v2": (lambda: tv.mobilenet_v2(), 11, image(64), ["y"], "ci"),
    "mobilenet_v3_large": (lambda: tv.mobilenet_v3_large(), 14, image(64), ["y"], "ci"),
    "mobilenet_v3_small": (lambda: tv.mobilenet_v3_small(), 17, image(64), ["y"], "ci"),
    "mnasnet0_5": (lambda: tv.mnasnet0_5(), 16, image(64), ["y"], "ci"),
    "shufflenet_v2_x0_5": (lambda: tv.shufflenet_v2_x0_5(), 13, image(64), ["y"], "ci"),
    "efficientnet_b0": (lambda: tv.efficientnet_b0(), 14, image(64), ["y"], "ci"),
    "efficientnet_v2_s": (lambda: tv.efficientnet_v2_s(), 17, image(64), ["y"], "all"),
    "regnet_x_400mf": (lambda: tv.regnet_x_400mf(), 12, image(64), ["y"], "ci"),
    "regnet_y_400mf": (lambda: tv.regnet_y_400mf(), 15, image(64), ["y"], "ci"),
    "convnext_tiny": (lambda: tv.convnext_tiny(), 17, image(64), ["y"], "all"),
    "vit_b_16": (lambda: tv.vit_b_16(), 14, image(224), ["y"], "all"),
    "vit_b_32_small": (lambda: tv.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4,
                                                    hidden_dim=64, mlp_dim=128), 14, image(64), ["y"], "ci"),
    "swin_t": (lambda: tv.swin_t(), 17, image(224, batch=1), ["y"], "all"),
    "swin_tiny_small": (lambda: tv.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                                   window_size=[4, 4], stochastic_depth_prob=0.0),
                        17, image(64), ["y"], "ci"),
    "maxvit_t": (lambda: tv.maxvit_t(), 17, image(224, batch=1), ["y"], "all"),
    # segmentation
    "fcn_resnet50": (lambda: seg.fcn_resnet50(weights_backbone=None, aux_loss=False), 11, image(64, batch=1),
                     ["out"], "all"),
    "deeplabv3_mobilenet_v3_large": (lambda: seg.deeplabv3_mobilenet_v3_large(weights_backbone=None, aux_loss=False),
                                     13, image(64, batch=1), ["out"], "ci"),
    "lraspp_mobilenet_v3_large": (lambda: seg.lraspp_mobilenet_v3_large(weights_backbone=None), 16,
                                  image(64, batch=1), ["out"], "ci"),
    # transformers written here
    "bert_style": (lambda: BertStyle(), 14,
                   [("input_ids", [2, 16], "ids:1000"), ("attention_mask", [2, 16], "mask"),
                    ("token_type_ids", [2, 16], "zeros")], ["logits"], "ci"),
    "gpt_style": (lambda: GptStyle(), 14, [("input_ids", [2, 16], "ids:1000")], ["logits"], "ci"),
    "greedy_decoder": (lambda: GreedyDecoder(), 14,
                       [("h0", [2, 48], "image"), ("first_token", [2], "ids:64"), ("steps", [], "count:12")],
                       ["scores"], "ci"),
}

WRITTEN_HERE = ("bert_style", "gpt_style", "greedy_decoder")


def make_input(shape, kind, rng):
    if kind == "image":
        return rng.standard_normal(shape).astype(np.float32)
    if kind.startswith("count:"):
        return np.array(int(kind[6:]), dtype=np.int64)
    if kind.startswith("ids:"):
        return rng.integers(0, int(kind[4:]), size=shape).astype(np.int64)
    if kind == "mask":
        m = np.ones(shape, dtype=np.int64)
        m[-1, shape[1] * 3 // 4:] = 0
        return m
    return np.zeros(shape, dtype=np.int64)


def export_one(name, outdir):
    build, opset, inputs, outputs, _ = MODELS[name]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = build()
    randomize_norms(model, gen)
    model.eval()
    rng = np.random.default_rng(sum(map(ord, name)))
    values = [make_input(shape, kind, rng) for _, shape, kind in inputs]
    tensors = tuple(torch.from_numpy(v) for v in values)
    dynamic = {n: {0: "batch"} for n, shape, _ in inputs if shape}
    for n in outputs:
        dynamic[n] = {0: "batch"}
    if name in ("bert_style", "gpt_style"):  # the sequence too
        for n, _, _ in inputs:
            dynamic[n] = {0: "batch", 1: "seq"}
    if name == "greedy_decoder":  # the steps taken too
        dynamic["scores"] = {0: "batch", 1: "steps"}
        model = torch.jit.script(model)
    folder = os.path.join(outdir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    with torch.no_grad():
        result = model(*tensors)
    if isinstance(result, dict):
        result = result["out"]
    # Not under no_grad: there, torchvision's encoder layers take PyTorch's fused attention
    # (aten::_native_multi_head_attention), which has no ONNX export.
    torch.onnx.export(model, tensors, path, opset_version=opset, do_constant_folding=True,
                      input_names=[n for n, _, _ in inputs], output_names=outputs, dynamic_axes=dynamic)
    onnx.checker.check_model(onnx.load(path))
    graph_inputs = [i.name for i in onnx.load(path).graph.input]
    for i, ((n, _, _), v) in enumerate(zip(inputs, values)):
        with open(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
    y = result.detach().numpy().astype(np.float32)
    with open(os.path.join(folder, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, outputs[0]).SerializeToString())
    with open(os.path.join(folder, "info.json"), "w") as f:
        written_here = name in WRITTEN_HERE
        source = ("written here, PyTorch " if written_here else "torchvision " + torchvision.__version__ + ", PyTorch ")
        json.dump({"name": name, "source": source + torch.__version__, "opset": opset,
                   "inputs": {n: list(s) for n, s, _ in inputs}, "graph_inputs": graph_inputs}, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir")
    parser.add_argument("--only", default="")
    parser.add_argument("--set", default="ci", choices=["ci", "all"])
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    names = [n for n, m in MODELS.items() if args.set == "all" or m[4] == "ci"]
    if args.only:
        names = args.only.split(",")
    if args.list:
        print("\n".join(names))
        return
    failed = []
    for name in names:
        try:
            export_one(name, args.outdir)
            print(name, flush=True)
        except Exception as e:  # report every model, then fail
            print(f"{name}: export failed: {e}", flush=True)
            failed.append(name)
    if failed:
        raise SystemExit("export failed: " + ", ".join(failed))


if __name__ == "__main__":
    main()
