#!/usr/bin/env bash
# What dynamic batching buys: predict throughput and latency at concurrency 64 on two MLPs,
# by model-server without batching and with --enable_batching, measured in this one run (the
# two servers take turns, level by level, so that drift in the machine's load hits both
# alike). The models:
#   digits   the digits MLP 64-512-10, trained here by model-train (config/train/digits.json)
#   mlp784   an MLP 784-1024-1024-10 (model-cli's mlp_784_1024_1024_10)
# Every answer is checked: its class must be the one the unbatched server gives for the input.
# Prints one Markdown table, then per model and protocol the throughput and p99 ratios
# (batching / none). The target: at least 3x the throughput on mlp784 at no worse p99.
#
#   bench/serving/run_batching_bench.sh [BUILD_DIR]        (default: build)
#
# Environment:
#   BENCH_DURATION_S   seconds measured per row (default 5), after BENCH_WARMUP_S (1)
#   BENCH_CONCURRENCY  requests kept outstanding (default 64)
#   BENCH_ROUNDS       times the whole set is run (default 1); each row shows its best round
#   BENCH_BATCHING     the batching parameters (default: max_batch_size 64, timeout 1 ms as
#                      TF Serving's guide advises, max_enqueued_batches 16, num_batch_threads
#                      one per CPU)
# The server without batching gets --rest_api_num_threads=CPUs (its best in
# run_serving_bench.sh); the one with batching gets the default, which leaves room to fill
# batches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../.."
# shellcheck source=bench/serving/lib.sh
source "$here/lib.sh"

build=${1:-build}
duration=${BENCH_DURATION_S:-5}
warmup=${BENCH_WARMUP_S:-1}
concurrency=${BENCH_CONCURRENCY:-64}
rounds=${BENCH_ROUNDS:-1}
cpus=$(nproc)
batching=${BENCH_BATCHING:-"max_batch_size { value: 64 } batch_timeout_micros { value: 1000 }
max_enqueued_batches { value: 16 } num_batch_threads { value: $cpus }"}

die() {
  echo "run_batching_bench: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_train=$build/training/model-train
model_server=$build/server/model-server
load_gen=$build/bench/serving_load_gen
require_binaries "$model_cli" "$model_train" "$model_server" "$load_gen"

start_scratch

"$model_train" --config config/train/digits.json --export_dir "$tmp/models/digits" --epochs 5 \
  >"$tmp/train.log" 2>&1 || die "model-train failed: $(tail -n 5 "$tmp/train.log")"
make_mlp784 "$tmp/models/mlp784"
cat >"$tmp/models.config" <<CONFIG
model_config_list {
  config { name: "digits" base_path: "$tmp/models/digits" }
  config { name: "mlp784" base_path: "$tmp/models/mlp784" }
}
CONFIG
echo "$batching" >"$tmp/batching.config"

start_server none --model_config_file="$tmp/models.config" --rest_api_num_threads="$cpus"
start_server batching --model_config_file="$tmp/models.config" --enable_batching \
  --batching_parameters_file="$tmp/batching.config"

rows=$tmp/rows
for model in digits mlp784; do
  if [[ $model == digits ]]; then width=64 x=$(row 64 1); else width=784 x=$(mlp784_row); fi
  body="{\"instances\": [[$x]]}"
  # The class the unbatched server gives this row is the answer every request must get.
  # shellcheck disable=SC2154  # port_none_rest: set by start_server
  answer=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$port_none_rest/v1/models/$model:predict") ||
    die "model-server (none) did not answer a $model predict"
  expect=$(grep -o '"classes": *[0-9]*' <<<"$answer" | grep -o '[0-9]*$') ||
    die "no class in the $model answer: $answer"
  for ((round = 0; round < rounds; round++)); do
    for protocol in rest grpc; do
      for side in none batching; do
        port_var="port_${side}_${protocol}"
        "$load_gen" --protocol="$protocol" --target="127.0.0.1:${!port_var}" --model="$model" \
          --label="$model|$side" --concurrency="$concurrency" --duration_s="$duration" --warmup_s="$warmup" \
          --header=0 --body="$body" --grpc_x="$x" --grpc_shape="1,$width" --expect="$expect" \
          --rest_output=classes --output=classes >>"$rows" ||
          die "the load generator failed against $side ($model, $protocol)"
      done
    done
  done
done

echo "predict at concurrency $concurrency, $cpus CPUs, ${duration} s per row after ${warmup} s warm-up," \
  "best of $rounds round(s)"
echo "batching: $(tr '\n' ' ' <"$tmp/batching.config")"
echo
awk -f "$here/best_rounds.awk" "$rows" | awk -F '|' '
  {
    for (i = 2; i <= 10; i++) gsub(/^ +| +$/, "", $i)
    key = $2 "|" $3 "|" $4
    order[++n] = key
    rps[key] = $6 + 0
    p99[key] = $9 + 0
    errors[key] = $10
    total_errors += $10
    row[key] = $2 " | " $3 " | " $4 " | " $6 " | " $7 " | " $8 " | " $9
  }
  END {
    print "| model | batching | protocol | requests/s | p50 µs | p90 µs | p99 µs | errors |"
    print "|---|---|---|---:|---:|---:|---:|---:|"
    for (i = 1; i <= n; i++) print "| " row[order[i]] " | " errors[order[i]] " |"
    print ""
    print "| model | protocol | throughput, batching / none | p99, batching / none |"
    print "|---|---|---:|---:|"
    for (i = 1; i <= n; i++) {
      split(order[i], part, "|")
      if (part[2] != "batching") continue
      none = part[1] "|none|" part[3]
      if (rps[none] > 0 && p99[none] > 0)
        printf "| %s | %s | %.2f | %.2f |\n", part[1], part[3], rps[order[i]] / rps[none], p99[order[i]] / p99[none]
    }
    if (total_errors > 0) printf "\nerrors: %d (the load generator said what they were on stderr)\n", total_errors
    exit (total_errors > 0)
  }' 
