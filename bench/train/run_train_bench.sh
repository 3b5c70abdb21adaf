#!/usr/bin/env bash
# model-train's training throughput next to PyTorch's, measured in this one run on this machine:
# installs PyTorch from Debian (python3-torch, with OpenBLAS; bench-only peers) when missing, builds
# bench_train, runs every configuration of both, and prints the table with ratios and the
# targets of the training issue.
#
#   bench/train/run_train_bench.sh [BUILD_DIR] [--seconds S] [--models "mlp cnn vit resnet"]
#
# Lockstep: float32 and bfloat16, as 1 replica on 1 thread, 1 replica on 2 intra-op threads,
# and 2 replicas of 1 thread. PyTorch: 1 and 2 threads, float32 and bf16 autocast. Each
# configuration runs S seconds (default 6) in 5 windows and reports the median window's
# samples/s; configurations alternate between the two frameworks, so that a noisy neighbour
# hits both alike.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
seconds=6
models="mlp cnn vit resnet"
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "run_train_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done

# PyTorch without OpenBLAS falls back to the reference BLAS, 20-40x slower: not a fair peer.
source "$root/bench/train/bench_packages.sh"
install_missing_packages python3-torch libopenblas0-pthread

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target bench_train >/dev/null

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for model in $models; do
  for precision in float32 bfloat16; do
    autocast=""
    [[ $precision == bfloat16 ]] && autocast=--autocast
    for shape in "1 1" "1 2" "2 1"; do
      read -r replicas threads <<<"$shape"
      "$build/bench/bench_train" --model "$model" --precision "$precision" --replicas "$replicas" \
        --threads "$threads" --seconds "$seconds" >>"$results"
      if [[ $replicas == 1 ]]; then  # PyTorch at the same thread count
        /usr/bin/python3 "$root/bench/train/torch_train.py" --model "$model" --threads "$threads" $autocast \
          --seconds "$seconds" >>"$results"
      fi
    done
  done
done

/usr/bin/python3 - "$results" <<'PY'
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip()
torch_version = next((r["torch"] for r in rows if r["framework"] == "pytorch"), "?")
print(f"CPU: {cpu}; PyTorch {torch_version}; samples/s, median of 5 windows\n")


def rate(framework, model, precision, replicas=1, threads=1):
    for r in rows:
        if r["framework"] != framework or r["model"] != model or r["precision"] != precision:
            continue
        if framework == "pytorch" and r["threads"] == threads:
            return r["samples_per_s"]
        if framework == "lockstep" and r["replicas"] == replicas and r["threads_per_replica"] == threads:
            return r["samples_per_s"]
    return None


targets = []
for model in sorted({r["model"] for r in rows}, reverse=True):
    batch = next(r["batch"] for r in rows if r["model"] == model)
    print(f"{model} (batch {batch})")
    print(f"  {'configuration':44s} {'samples/s':>10s}")
    for precision in ("float32", "bfloat16"):
        for threads in (1, 2):
            name = f"PyTorch {precision}{' autocast' if precision == 'bfloat16' else ''}, {threads} thread(s)"
            print(f"  {name:44s} {rate('pytorch', model, precision, threads=threads) or 0:10.0f}")
        for replicas, threads in ((1, 1), (1, 2), (2, 1)):
            name = f"Lockstep {precision}, {replicas} replica(s) x {threads} thread(s)"
            print(f"  {name:44s} {rate('lockstep', model, precision, replicas, threads) or 0:10.0f}")
    torch_best = max(rate("pytorch", model, p, threads=2) or 0 for p in ("float32", "bfloat16"))
    ours = rate("lockstep", model, "bfloat16", 2, 1) or 0
    targets.append((f"{model}: Lockstep bf16 2 replicas / PyTorch's best at 2 threads", ours / torch_best, 1.5))
    for replicas, threads in ((2, 1), (1, 1)):
        fp32 = rate("lockstep", model, "float32", replicas, threads) or 1
        bf16 = rate("lockstep", model, "bfloat16", replicas, threads) or 0
        targets.append((f"{model}: Lockstep bf16 / float32 ({replicas} replica(s) x {threads} thread(s))", bf16 / fp32, 1.6))
    for precision in ("float32", "bfloat16"):
        one = rate("lockstep", model, precision, 1, 1) or 1
        two = rate("lockstep", model, precision, 2, 1) or 0
        targets.append((f"{model}: Lockstep {precision} 2 replicas / 1 replica (1 thread each)", two / one, 1.8))
    intra = rate("lockstep", model, "float32", 1, 2) or 1
    targets.append((f"{model}: Lockstep float32 2 replicas / 1 replica on 2 threads", (rate("lockstep", model, "float32", 2, 1) or 0) / intra, None))
    print()

print("ratios (target in brackets)")
for name, value, target in targets:
    verdict = "" if target is None else (f"[>= {target}] " + ("met" if value >= target else "MISSED"))
    print(f"  {name:72s} {value:5.2f}x {verdict}")
PY
