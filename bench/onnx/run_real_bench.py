#!/usr/bin/python3
"""Real architectures, Lockstep beside onnxruntime: the table of issue 41.

  /usr/bin/python3 bench/onnx/run_real_bench.py [--build build] [--models resnet50,...]
      [--batches 1,8] [--threads 1,2] [--iterations N] [--rounds R] [--no-bf16] [--write]
      [--profile resnet50,efficientnet_b0]

Exports each model with PyTorch (torchvision 0.14's ResNet-50, MobileNetV3-Large, EfficientNet-B0,
ConvNeXt-T and ViT-B/16 at 224 x 224, random weights with non-trivial BatchNorm statistics; a
BERT-base-sized encoder at sequence 128 with int64 token ids, mask and segments; a GPT-style
decoder with GPT-2 small's layers at sequence 128), once per version of this script and of the
model code (cached under BUILD/onnx-bench/real/), with a seeded input per batch and PyTorch's
answer on it. Then for every (model, batch, threads) it runs `bench_onnx` (float32, then
`--bf16-products 1`) and onnxruntime-node's `ort_bench.js` on the same file and the same input,
alternately, R rounds, keeping each one's best median. The first round checks both float32
answers against PyTorch's (max |difference| <= 1e-3 x max(1, max |PyTorch|), else it stops) and
measures the bf16 answer: its largest difference from PyTorch and the share of rows (the last
axis: classes, or a position's vocabulary) whose arg max is PyTorch's. The products' FLOPs (the
convolutions and matrix products, PyTorch's profiler count) over the latency, against the FMA peak
measured in the same run (`bench_onnx --peak-seconds`), give each runtime's share of the machine.

--write puts the table in bench/onnx/README.md between its markers; --profile prints
`bench_onnx --profile` (per node: time, FLOPs, share of the peak) for those models at batch 1,
one thread.
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 128

# name: what it is
MODELS = {
    "resnet50": "ResNet-50 (torchvision)",
    "mobilenet_v3_large": "MobileNetV3-Large (torchvision)",
    "efficientnet_b0": "EfficientNet-B0 (torchvision)",
    "convnext_tiny": "ConvNeXt-T (torchvision)",
    "vit_b_16": "ViT-B/16 (torchvision)",
    "bert_base_style": f"BERT-style encoder: 12 layers, d 768, 12 heads, ff 3072, vocab 30522, seq {SEQ}",
    "gpt_style": f"GPT-style decoder: 12 pre-norm layers, d 768, 12 heads, ff 3072, causal, vocab 8192, seq {SEQ}",
}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


# ---------------------------------------------------------------------------------------------
# Export (in a child process per model: torch's memory goes back to the machine when it ends)


def build_model(name):
    import torch
    import torchvision.models as tv
    sys.path.insert(0, os.path.join(ROOT, "tests/real_models"))
    import export_real_models as erm

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if name == "bert_base_style":
        model = erm.BertStyle(vocab=30522, d=768, heads=12, ff=3072, layers=12, max_len=512, classes=2)
    elif name == "gpt_style":
        model = erm.GptStyle(vocab=8192, d=768, heads=12, ff=3072, layers=12, max_len=1024)
    else:
        model = getattr(tv, name)()
    erm.randomize_norms(model, gen)
    return model.eval()


def model_inputs(name, batch, rng):
    import numpy as np
    if name == "bert_base_style":
        mask = np.ones((batch, SEQ), dtype=np.int64)
        mask[-1, SEQ * 3 // 4:] = 0  # one padded row
        return [("input_ids", rng.integers(0, 30522, size=(batch, SEQ)).astype(np.int64)),
                ("attention_mask", mask), ("token_type_ids", np.zeros((batch, SEQ), dtype=np.int64))]
    if name == "gpt_style":
        return [("input_ids", rng.integers(0, 8192, size=(batch, SEQ)).astype(np.int64))]
    return [("x", rng.standard_normal((batch, 3, 224, 224)).astype(np.float32))]


def export(name, folder, batches):
    import numpy as np
    import onnx
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench/onnx"))
    from export_models import product_flops_of

    torch.set_num_threads(2)
    model = build_model(name)
    example = [torch.from_numpy(v) for _, v in model_inputs(name, 1, np.random.default_rng(0))]
    names = [n for n, _ in model_inputs(name, 1, np.random.default_rng(0))]
    dynamic = {n: ({0: "batch", 1: "seq"} if n != "x" else {0: "batch"}) for n in names}
    dynamic["y"] = {0: "batch"}
    path = os.path.join(folder, "model.onnx")
    # Not under no_grad: there, torchvision's encoder layers take PyTorch's fused attention,
    # which has no ONNX export.
    torch.onnx.export(model, tuple(example), path, opset_version=17 if name != "efficientnet_b0" else 14,
                      do_constant_folding=True, input_names=names, output_names=["y"], dynamic_axes=dynamic)
    onnx.checker.check_model(path)
    info = {"name": name, "flops_per_batch_1": 0, "batches": {}}
    with torch.no_grad():
        info["flops_per_batch_1"] = product_flops_of(model, example)
        for batch in batches:
            values = model_inputs(name, batch, np.random.default_rng(1000 + batch))
            specs = []
            for n, v in values:
                f = os.path.join(folder, f"{n}_b{batch}.raw")
                v.tofile(f)
                specs.append({"name": n, "dtype": str(v.dtype), "shape": list(v.shape), "file": f})
            with open(os.path.join(folder, f"inputs_b{batch}.json"), "w") as out:
                json.dump(specs, out)
            y = model(*[torch.from_numpy(v) for _, v in values])
            y.detach().numpy().astype(np.float32).tofile(os.path.join(folder, f"torch_b{batch}.f32"))
            info["batches"][str(batch)] = list(y.shape)
    with open(os.path.join(folder, "info.json"), "w") as out:
        json.dump(info, out)


def cache_key(name, batches):
    """What an export depends on: the code that builds, feeds and exports the model, and the model
    code it imports (not the rest of this script, so that editing the runs keeps the cache)."""
    import inspect
    h = hashlib.sha256()
    for f in ("tests/real_models/export_real_models.py", "bench/onnx/export_models.py"):
        with open(os.path.join(ROOT, f), "rb") as src:
            h.update(src.read())
    for fn in (build_model, model_inputs, export):
        h.update(inspect.getsource(fn).encode())
    h.update(f"{name} {sorted(batches)} {SEQ}".encode())
    return h.hexdigest()


def ensure_exported(work, name, batches):
    folder = os.path.join(work, name)
    key = cache_key(name, batches)
    key_file = os.path.join(folder, "key")
    if os.path.exists(key_file) and open(key_file).read() == key:
        return folder
    os.makedirs(folder, exist_ok=True)
    print(f"run_real_bench: exporting {name}", file=sys.stderr)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--export-one", name, "--export-dir", folder,
                    "--batches", ",".join(map(str, batches))], check=True, stdout=subprocess.DEVNULL)
    with open(key_file, "w") as out:
        out.write(key)
    return folder


# ---------------------------------------------------------------------------------------------
# Runs


def iterations_for(flops, threads):
    """Enough runs for a stable median in about two seconds, at least 3, at most 200."""
    seconds = flops / (60e9 * threads)
    return max(3, min(200, int(2.0 / max(seconds, 1e-5))))


def read_f32(path):
    import numpy as np
    return np.fromfile(path, dtype=np.float32)


def check(label, got_path, want, what):
    import numpy as np
    got = read_f32(got_path)
    if got.shape != want.shape:
        sys.exit(f"run_real_bench: {label}: {what} has {got.size} values, PyTorch {want.size}")
    diff = float(np.max(np.abs(got - want)))
    bound = 1e-3 * max(1.0, float(np.max(np.abs(want))))
    if not diff <= bound:
        sys.exit(f"run_real_bench: {label}: {what} differs from PyTorch by {diff:.3g} (bound {bound:.3g})")
    return diff


def argmax_agreement(got_path, want, last):
    import numpy as np
    got = read_f32(got_path).reshape(-1, last)
    ref = want.reshape(-1, last)
    return float(np.mean(np.argmax(got, axis=1) == np.argmax(ref, axis=1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-bf16", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--profile", default="")
    parser.add_argument("--export-only", action="store_true", help="export (or find cached) and stop")
    parser.add_argument("--export-one", default="")
    parser.add_argument("--export-dir", default="")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if args.export_one:
        export(args.export_one, args.export_dir, batches)
        return

    build = os.path.abspath(args.build)
    work = os.path.join(build, "onnx-bench", "real")
    modules = os.path.join(build, "onnx-bench", "node", "node_modules")
    if not os.path.exists(os.path.join(modules, "onnxruntime-node", "package.json")):
        print("run_real_bench: installing the bench-only peer onnxruntime-node (npm)", file=sys.stderr)
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-save", "--no-audit", "--no-fund", "--prefix",
                        os.path.dirname(modules), "onnxruntime-node"], check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build, "--target", "bench_onnx", "-j2"], check=True, stdout=subprocess.DEVNULL)
    ours = os.path.join(build, "bench", "bench_onnx")
    ort = ["node", os.path.join(ROOT, "bench/onnx/ort_bench.js"), "--modules", modules]
    ort_version = json.load(open(os.path.join(modules, "onnxruntime-node", "package.json")))["version"]
    threads_list = [int(t) for t in args.threads.split(",")]
    models = args.models.split(",")
    folders = {m: ensure_exported(work, m, batches) for m in models}
    if args.export_only:
        return

    peaks = {t: json.loads(sh([ours, "--peak-seconds", "1", "--threads", str(t)]))["peak_gflops"] for t in threads_list}
    print(f"run_real_bench: FMA peak {peaks} GFLOP/s; onnxruntime-node {ort_version}", file=sys.stderr)

    for name in [p for p in args.profile.split(",") if p]:
        folder = folders[name]
        print(f"\n### {name}: per node, batch 1, 1 thread\n")
        print(sh([ours, "--model", os.path.join(folder, "model.onnx"), "--inputs", os.path.join(folder, "inputs_b1.json"),
                  "--threads", "1", "--iterations", "5", "--profile", "10"]))

    rows = []
    for name in models:
        folder = folders[name]
        info = json.load(open(os.path.join(folder, "info.json")))
        model = os.path.join(folder, "model.onnx")
        for batch in batches:
            want = read_f32(os.path.join(folder, f"torch_b{batch}.f32"))
            last = info["batches"][str(batch)][-1]
            spec = os.path.join(folder, f"inputs_b{batch}.json")
            flops = info["flops_per_batch_1"] * batch
            for threads in threads_list:
                label = f"{name} batch {batch} threads {threads}"
                n = str(iterations_for(flops, threads))
                common = ["--model", model, "--inputs", spec, "--threads", str(threads), "--iterations", n]
                best = {"ours": float("inf"), "ort": float("inf"), "bf16": float("inf")}
                diff32 = diff16 = agree = None
                for r in range(args.rounds):
                    dump = r == 0
                    out = os.path.join(work, "out_{}.f32")
                    runs = [("ours", [ours] + common + (["--dump", out.format("ours")] if dump else [])),
                            ("ort", ort + common + (["--dump", out.format("ort")] if dump else []))]
                    if not args.no_bf16:
                        runs.append(("bf16", [ours] + common + ["--bf16-products", "1"] +
                                     (["--dump", out.format("bf16")] if dump else [])))
                    for key, cmd in runs:
                        result = json.loads(sh(cmd).strip().splitlines()[-1])
                        best[key] = min(best[key], result["median_us"])
                    if dump:
                        diff32 = check(label, out.format("ours"), want, "Lockstep")
                        check(label, out.format("ort"), want, "onnxruntime")
                        if not args.no_bf16:
                            import numpy as np
                            diff16 = float(np.max(np.abs(read_f32(out.format("bf16")) - want)))
                            agree = argmax_agreement(out.format("bf16"), want, last)
                print(f"run_real_bench: {label}: ours {best['ours']:.0f} us, onnxruntime {best['ort']:.0f} us, "
                      f"bf16 {best['bf16']:.0f} us", file=sys.stderr)
                rows.append({"model": name, "batch": batch, "threads": threads, "flops": flops, "peak": peaks[threads],
                             "diff32": diff32, "diff16": diff16, "agree": agree, **best})

    table = ["| model | batch | threads | Lockstep ms | onnxruntime ms | ours / ort | ours % of peak | "
             "ort % of peak | bf16 ms | bf16 / ort fp32 | max diff from PyTorch: fp32, bf16 | bf16 arg max as PyTorch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    ratios = []
    for r in rows:
        ratio = r["ours"] / r["ort"]
        ratios.append(ratio)
        share = lambda us: 100 * r["flops"] / (us * 1e3) / r["peak"] if r["peak"] else float("nan")
        bf16 = "" if args.no_bf16 else f"{r['bf16'] / 1000:.1f}"
        bf16_ratio = "" if args.no_bf16 else f"{r['bf16'] / r['ort']:.2f}"
        diffs = f"{r['diff32']:.2g}" + ("" if args.no_bf16 else f", {r['diff16']:.2g}")
        agree = "" if args.no_bf16 else f"{100 * r['agree']:.1f} %"
        table.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['ours'] / 1000:.1f} | {r['ort'] / 1000:.1f} | "
                     f"{ratio:.2f} | {share(r['ours']):.0f} % | {share(r['ort']):.0f} % | {bf16} | {bf16_ratio} | "
                     f"{diffs} | {agree} |")
    summary = (f"\nMedian row ours / onnxruntime: **{statistics.median(ratios):.2f}**; rows at or under 1.0: "
               f"{sum(1 for x in ratios if x <= 1.0)} of {len(ratios)}. FMA peak in this run: "
               + ", ".join(f"{peaks[t]:.0f} GFLOP/s on {t} thread{'s' if t > 1 else ''}" for t in threads_list)
               + f"; onnxruntime-node {ort_version}.")
    text = "\n".join(table) + "\n" + summary
    print(text)
    if args.write:
        readme = os.path.join(ROOT, "bench/onnx/README.md")
        body = open(readme).read()
        begin, end = "<!-- real-bench:begin -->", "<!-- real-bench:end -->"
        block = begin + "\n" + text + "\n" + end
        if begin in body:
            body = body[:body.index(begin)] + block + body[body.index(end) + len(end):]
        else:
            body += "\n" + block + "\n"
        open(readme, "w").write(body)
        print("run_real_bench: wrote bench/onnx/README.md", file=sys.stderr)


if __name__ == "__main__":
    main()
