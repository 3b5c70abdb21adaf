#!/usr/bin/env bash
# ResNet-50 (bench/onnx/run_real_bench.py's export) through model-server beside the same model in
# process (bench_onnx), on the same machine in the same run: the serving path must keep the
# kernels' speed (issue 41).
#   - latency at concurrency 1 and 4: gRPC ModelInfer and the Open Inference Protocol's binary
#     REST, against bench_onnx's median on as many threads as the server computes on;
#   - with --enable_batching (max_batch_size 8): throughput at concurrency 8 against bench_onnx's
#     batch-8 throughput.
# Every answer is checked, bit for bit, against the in-process answer (a row's answer does not
# depend on the batch or the thread count).
#
#   bench/serving/run_real_model_serving.sh [BUILD_DIR] [--duration S]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
duration=10
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    -*) echo "run_real_model_serving: unknown argument $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
die() { echo "run_real_model_serving: $*" >&2; exit 1; }
build=$(cd "$build" && pwd)
model_server=$build/server/model-server
model_cli=$build/runtime/cli/model-cli
bench_onnx=$build/bench/bench_onnx
load_gen=$build/bench/serving_load_gen
# shellcheck source=bench/serving/lib.sh
source "$root/bench/serving/lib.sh"
require_binaries "$model_server" "$bench_onnx" "$load_gen"
real=$build/onnx-bench/real/resnet50
[[ -f $real/info.json ]] || /usr/bin/python3 "$root/bench/onnx/run_real_bench.py" --build "$build" --models resnet50 --export-only
threads=$(nproc)

start_scratch
mkdir -p "$tmp/models/resnet50/1"
ln "$real/model.onnx" "$tmp/models/resnet50/1/model.onnx" 2>/dev/null || cp "$real/model.onnx" "$tmp/models/resnet50/1/"

median_us() { sed -n 's/.*"median_us": \([0-9.]*\).*/\1/p'; }
in1=$("$bench_onnx" --model "$real/model.onnx" --inputs "$real/inputs_b1.json" --threads "$threads" --iterations 40 \
  --dump "$tmp/expect.f32" | median_us)
in8=$("$bench_onnx" --model "$real/model.onnx" --inputs "$real/inputs_b8.json" --threads "$threads" --iterations 8 | median_us)

gen=("$load_gen" --model=resnet50 --input=x --grpc_shape=1,3,224,224 --grpc_x_file="$real/x_b1.raw" --output=y
  --expect_file="$tmp/expect.f32" --duration_s="$duration" --warmup_s=2)
table=$tmp/table
start_server plain --model_name=resnet50 --model_base_path="$tmp/models/resnet50"
"${gen[@]}" --protocol=grpc --api=v2 --target=127.0.0.1:"$port_plain_grpc" --concurrency=1,4 --label=model-server >"$table"
"${gen[@]}" --protocol=rest --api=v2_binary --target=127.0.0.1:"$port_plain_rest" --concurrency=1,4 --label=model-server \
  --header=0 >>"$table"
kill "$pid_plain"
printf 'max_batch_size { value: 8 }\nbatch_timeout_micros { value: 20000 }\nmax_enqueued_batches { value: 64 }\nnum_batch_threads { value: 1 }\n' \
  >"$tmp/batching.txt"
start_server batching --model_name=resnet50 --model_base_path="$tmp/models/resnet50" --enable_batching \
  --batching_parameters_file="$tmp/batching.txt"
"${gen[@]}" --protocol=grpc --api=v2 --target=127.0.0.1:"$port_batching_grpc" --concurrency=8 \
  --label="model-server, batching" --header=0 >>"$table"

echo "ResNet-50, $threads threads; in process (bench_onnx): batch 1 median ${in1} us, batch 8 median ${in8} us" \
  "($(awk -v t="$in8" 'BEGIN { printf "%.1f", 8e6 / t }') images/s)"
cat "$table"
awk -v in1="$in1" -v in8="$in8" -F'|' '
  NR > 2 && $5 + 0 > 0 {
    gsub(/ /, "", $4)
    gsub(/^ +| +$/, "", $3)
    if ($2 ~ /batching/) printf "%s concurrency %s: %.2f x the in-process batch-8 throughput\n", $3, $4, $5 / (8e6 / in8)
    else printf "%s concurrency %s: p50 %.2f x the in-process latency, throughput %.2f x in-process batch 1\n", $3, $4, $6 / in1, $5 / (1e6 / in1)
  }' "$table"
