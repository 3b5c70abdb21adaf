#!/usr/bin/env bash
# Fashion-MNIST trained by model-train (examples/fashion_mnist/{mlp,cnn}.json, streamed from the
# TFRecord shards convert.py writes) and by PyTorch (fashion_mnist_torch.py: the same models,
# optimiser, batch size and epochs, data in memory), in one run on this machine: test accuracy,
# training seconds and samples/s, one line per configuration, then the ratios.
#
#   bench/train/run_fashion_mnist_bench.sh [BUILD_DIR] [--epochs E] [--models "mlp cnn"]
#
# --models resnet compares examples/fashion_mnist/resnet.json (its SGD recipe, augmentation and
# batch norm; fashion_mnist_torch.py follows it): about an hour per configuration at 30 epochs.
#
# model-train: float32 and bfloat16, 2 replicas of 1 thread (the mirrored strategy on both
# cores). PyTorch: float32 and bf16 autocast, at 1 and 2 threads (its best is the peer).
# samples/s is over the epochs after the first (model-train: the median epoch's). Installs
# dataset-fashion-mnist, python3-torch, libopenblas0-pthread and python3-crc32c (bench-only)
# when missing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
epochs=10
models="mlp cnn"
while [[ $# -gt 0 ]]; do
  case $1 in
    --epochs) epochs=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "run_fashion_mnist_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
source "$root/bench/train/bench_packages.sh"
# PyTorch without OpenBLAS falls back to the reference BLAS, 20-40x slower: not a fair peer.
install_missing_packages dataset-fashion-mnist python3-torch libopenblas0-pthread python3-crc32c
cmake --build "$build" -j"$(nproc)" --target model-train >/dev/null
if [[ ! -f $root/examples/fashion_mnist/data/test-00000-of-00001.tfrecord ]]; then
  /usr/bin/python3 "$root/examples/fashion_mnist/convert.py" >&2
fi

lockstep() {  # model precision
  local log
  log=$(mktemp)
  (cd "$root" && "$build/training/model-train" --config "examples/fashion_mnist/$1.json" --epochs "$epochs" \
    --replicas 2 --precision "$2" --export_dir "$(mktemp -d)") >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  /usr/bin/python3 - "$log" "$1" "$2" <<'PY'
import json, re, statistics, sys
text = open(sys.argv[1]).read()
rates = [float(x) for x in re.findall(r"event=epoch .*samples_per_s=([0-9.]+)", text)]
elapsed = float(re.findall(r"elapsed_s=([0-9.]+)", text)[-1])
accuracy = float(re.search(r"test_accuracy=([0-9.]+) test_loss", text).group(1))
print(json.dumps({"framework": "lockstep", "model": sys.argv[2], "threads": 2, "precision": sys.argv[3],
                  "epochs": len(rates), "test_accuracy": accuracy, "train_seconds": elapsed,
                  "samples_per_s": round(statistics.median(rates[1:] or rates))}))
PY
  rm -f "$log"
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for model in $models; do
  for precision in float32 bfloat16; do
    lockstep "$model" "$precision" | tee -a "$results"
    bf16=""
    [[ $precision == bfloat16 ]] && bf16=--bf16
    for threads in 1 2; do
      /usr/bin/python3 "$root/bench/train/fashion_mnist_torch.py" --model "$model" --threads "$threads" $bf16 \
        --epochs "$epochs" | tee -a "$results"
    done
  done
done
/usr/bin/python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print("| model | precision | framework | threads | epochs | test accuracy | train s | samples/s |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %s | %s | %d | %d | %.2f %% | %.1f | %d |" % (r["model"], r["precision"], r["framework"], r["threads"],
          r["epochs"], 100 * r["test_accuracy"], r["train_seconds"], r["samples_per_s"]))
print()
print("| model | precision | Lockstep / PyTorch's best | target |")
print("|---|---|---:|---|")
for model in sorted({r["model"] for r in rows}):
    for precision in ("float32", "bfloat16"):
        ours = [r for r in rows if r["model"] == model and r["precision"] == precision and r["framework"] == "lockstep"]
        peer = [r for r in rows if r["model"] == model and r["precision"] == precision and r["framework"] == "pytorch"]
        if ours and peer:
            ratio = ours[0]["samples_per_s"] / max(p["samples_per_s"] for p in peer)
            target = 1.5 if precision == "bfloat16" else 1.0
            print("| %s | %s | %.2fx | >= %.1fx %s |" % (model, precision, ratio, target, "met" if ratio >= target else "missed"))
PY
