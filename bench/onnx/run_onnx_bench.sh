#!/usr/bin/env bash
# Lockstep's latency on imported ONNX models next to onnxruntime's (onnxruntime-node, CPU), on
# the same .onnx files and the same inputs, measured in this one run on this machine.
#
#   bench/onnx/run_onnx_bench.sh [BUILD_DIR] [--rounds R] [--models "mlp cnn transformer"] [--no-build]
#
# Installs the bench-only peers when missing (python3-torch from Debian; onnxruntime-node from
# npm into BUILD_DIR/onnx-bench/node, with --ignore-scripts: its CPU runtime ships in the
# package), builds bench_onnx, exports the models with PyTorch (bench/onnx/export_models.py),
# and for each model x threads {1,2} x batch {1,32} runs bench_onnx and ort_bench.js
# alternately for R rounds (default 3), keeping each one's best median; and bench_onnx again
# with the model's products on the bf16 matmul core (--bf16-products 1, the server's
# matmul_precision "bfloat16"). The first round cross-checks the float32 outputs of both
# against PyTorch's and fails loudly on a mismatch, and measures how far the bf16 answers move
# (largest difference from PyTorch's, and how often each output row's arg max stays the same).
# Prints markdown tables; the target is ours/onnxruntime <= 0.8 on every row, in float32. Beside
# each float32 row: both runtimes' product rates (the models' matmul and convolution FLOPs, counted
# by PyTorch's profiler, over the latency) as a fraction of this machine's FMA peak on that many
# threads (measured by bench_onnx --peak-seconds before the runs), and the fraction of the peak
# that 0.8x onnxruntime's latency would take: above 100 % the row's target is out of reach of
# any implementation of those products.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
rounds=3
models="mlp cnn transformer"
build_it=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --no-build) build_it=0; shift ;;  # use BUILD_DIR/bench/bench_onnx as it is
    *) echo "run_onnx_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(mkdir -p "$build" && cd "$build" && pwd)
py=/usr/bin/python3

sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
if ! $py -c 'import torch, onnx, numpy' 2>/dev/null; then
  echo "run_onnx_bench: installing the bench-only peers python3-torch python3-onnx" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends python3-torch python3-onnx python3-numpy
fi

work=$build/onnx-bench
modules=$work/node/node_modules
if [[ ! -f $modules/onnxruntime-node/package.json ]]; then
  echo "run_onnx_bench: installing the bench-only peer onnxruntime-node (npm)" >&2
  mkdir -p "$work/node"
  npm install --ignore-scripts --no-save --no-audit --no-fund --prefix "$work/node" onnxruntime-node >&2
fi
ort_version=$(node -p "require('$modules/onnxruntime-node/package.json').version")

if [[ $build_it -eq 1 ]]; then
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$build" -j"$(nproc)" --target bench_onnx >/dev/null
fi
ours=$build/bench/bench_onnx

echo "run_onnx_bench: exporting the models with PyTorch" >&2
$py "$root/bench/onnx/export_models.py" --bench "$work/models" --batches 1,32 --seq 128 2>/dev/null

# Iterations per (model, batch): enough for a stable median, few enough that the whole run stays
# within about 10 minutes on 2 cores.
iterations() {
  case $1:$2 in
    mlp:1) echo 5000 ;; mlp:32) echo 1000 ;;
    cnn:1) echo 500 ;; cnn:32) echo 40 ;;
    transformer:1) echo 60 ;; transformer:32) echo 8 ;;
    *) echo 20 ;;
  esac
}

shape_of() {  # model batch -> comma-separated input shape from models.json
  $py -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(','.join(map(str, next(m for m in d['models'] if m['name']==sys.argv[2])['shapes'][sys.argv[3]])))" \
    "$work/models/models.json" "$1" "$2"
}

median_of() { $py -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["median_us"])'; }

# The bf16 answers against PyTorch's: the largest difference (the float32 one beside it) and the
# share of output rows (10 classes each) whose arg max is PyTorch's.
bf16_accuracy() {  # bf16.f32 ours.f32 torch.f32
  $py - "$@" <<'EOF'
import sys
import numpy as np
bf16, f32, ref = [np.fromfile(f, np.float32) for f in sys.argv[1:]]
same = float(np.mean(bf16.reshape(-1, 10).argmax(1) == ref.reshape(-1, 10).argmax(1)))
print(f"{float(np.abs(bf16 - ref).max()):.2g} {float(np.abs(f32 - ref).max()):.2g} {100 * same:.1f}")
EOF
}

# ours and ort dump their outputs; both must match PyTorch's (and so each other).
cross_check() {  # label ours.f32 ort.f32 torch.f32
  $py - "$@" <<'EOF'
import sys
import numpy as np
label, ours, ort, ref = sys.argv[1], *[np.fromfile(f, np.float32) for f in sys.argv[2:]]
scale = max(1.0, float(np.abs(ref).max()))
for name, got in (("lockstep", ours), ("onnxruntime", ort)):
    if got.shape != ref.shape:
        sys.exit(f"run_onnx_bench: {label}: {name} gave {got.size} values, PyTorch {ref.size}")
    diff = float(np.abs(got - ref).max())
    if not diff < 1e-3 * scale:
        sys.exit(f"run_onnx_bench: {label}: {name} differs from PyTorch by {diff:g} (scale {scale:g})")
diff = float(np.abs(ours - ort).max())
print(f"run_onnx_bench: {label}: outputs agree (max |lockstep - onnxruntime| = {diff:.2g})", file=sys.stderr)
EOF
}

flops_of() {  # model batch -> the model's product FLOPs at that batch, from models.json
  $py -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(next(m for m in d['models'] if m['name']==sys.argv[2])['product_flops'][sys.argv[3]])" \
    "$work/models/models.json" "$1" "$2"
}

peaks=$work/peaks.txt  # threads peak_gflops (or null)
: >"$peaks"
for threads in 1 2; do
  peak=$("$ours" --peak-seconds 1 --threads "$threads" | $py -c 'import json,sys; print(json.load(sys.stdin)["peak_gflops"])')
  echo "run_onnx_bench: float32 FMA peak on $threads threads: $peak GFLOP/s" >&2
  echo "$threads $peak" >>"$peaks"
done

results=$work/results.txt
: >"$results"
for model in $models; do
  for threads in 1 2; do
    for batch in 1 32; do
      label="$model threads=$threads batch=$batch"
      dir=$work/models/$model
      shape=$(shape_of "$model" "$batch")
      iters=$(iterations "$model" "$batch")
      common=(--model "$dir/model.onnx" --input x --shape "$shape" --threads "$threads"
              --iterations "$iters" --input-file "$dir/input_b$batch.f32")
      best_ours="" best_ort="" best_bf16="" accuracy="- - -"
      for ((round = 0; round < rounds; ++round)); do
        dump_ours=() dump_ort=()
        if [[ $round -eq 0 ]]; then
          dump_ours=(--dump "$work/out_ours.f32")
          dump_ort=(--dump "$work/out_ort.f32")
        fi
        if ! out=$("$ours" "${common[@]}" "${dump_ours[@]}" 2>&1); then
          echo "run_onnx_bench: $label: bench_onnx failed: $out" >&2
          echo "$model $threads $batch FAILED FAILED FAILED - - - 0" >>"$results"
          continue 2
        fi
        m_ours=$(median_of <<<"$out")
        m_ort=$(node "$root/bench/onnx/ort_bench.js" --modules "$modules" "${common[@]}" "${dump_ort[@]}" | median_of)
        dump_bf16=()
        [[ $round -eq 0 ]] && dump_bf16=(--dump "$work/out_bf16.f32")
        m_bf16=$("$ours" "${common[@]}" --bf16-products 1 "${dump_bf16[@]}" | median_of)
        if [[ $round -eq 0 ]]; then
          cross_check "$label" "$work/out_ours.f32" "$work/out_ort.f32" "$dir/torch_b$batch.f32"
          accuracy=$(bf16_accuracy "$work/out_bf16.f32" "$work/out_ours.f32" "$dir/torch_b$batch.f32")
        fi
        best_bf16=$($py -c "import sys; print(min(float(v) for v in sys.argv[1:] if v))" "$m_bf16" "$best_bf16")
        best_ours=$($py -c "import sys; print(min(float(v) for v in sys.argv[1:] if v))" "$m_ours" "$best_ours")
        best_ort=$($py -c "import sys; print(min(float(v) for v in sys.argv[1:] if v))" "$m_ort" "$best_ort")
      done
      echo "run_onnx_bench: $label: lockstep ${best_ours} us, onnxruntime ${best_ort} us" >&2
      echo "$model $threads $batch $best_ours $best_ort $best_bf16 $accuracy $(flops_of "$model" "$batch")" >>"$results"
    done
  done
done

echo "onnxruntime-node $ort_version, torch $($py -c 'import torch; print(torch.__version__)'), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $rounds rounds, best median per runtime"
echo
$py - "$results" "$peaks" <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
peaks = {t: (None if p == "None" else float(p)) for t, p in (line.split() for line in open(sys.argv[2]))}
print("| model | threads | batch | ours µs | onnxruntime µs | ratio (ours/ort) | ≤ 0.8 | ours % of peak | onnxruntime % of peak | 0.8 × onnxruntime needs |")
print("|---|---:|---:|---:|---:|---:|:---:|---:|---:|---:|")
for model, threads, batch, ours, ort, *rest in rows:
    if ours == "FAILED":
        print(f"| {model} | {threads} | {batch} | import/run failed | | | no | | | |")
        continue
    ratio = float(ours) / float(ort)
    peak, flops = peaks.get(threads), float(rest[-1])
    def share(us):  # the products' rate at this latency, as a percentage of the peak
        return f"{100 * flops / (us * 1e3) / peak:.0f} %" if peak else "n/a"
    print(f"| {model} | {threads} | {batch} | {float(ours):.0f} | {float(ort):.0f} | {ratio:.2f} | "
          f"{'yes' if ratio <= 0.8 else 'no'} | {share(float(ours))} | {share(float(ort))} | {share(0.8 * float(ort))} |")
print()
print("bf16 matmul core (matmul_precision \"bfloat16\"):")
print()
print("| model | threads | batch | ours bf16 µs | bf16 / float32 | bf16 / onnxruntime | max abs diff from PyTorch, bf16 (float32) | same arg max as PyTorch |")
print("|---|---:|---:|---:|---:|---:|---|---:|")
for model, threads, batch, ours, ort, bf16, d16, d32, same, _ in rows:
    if ours == "FAILED":
        continue
    print(f"| {model} | {threads} | {batch} | {float(bf16):.0f} | {float(bf16) / float(ours):.2f} | "
          f"{float(bf16) / float(ort):.2f} | {d16} ({d32}) | {same} % |")
EOF
