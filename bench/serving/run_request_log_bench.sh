#!/usr/bin/env bash
# What request logging (logging_config) costs a request: model-server serving the MLP
# 784-1024-1024-10 (one 784-float row per predict, as run_request_cost.sh) at concurrency 16,
# REST then gRPC, without logging_config, with sampling_rate 0.01 and with 1.0 (every request's
# PredictionLog record written by the file collector into the scratch directory). The three
# servers run one at a time, in alternating rounds, so that a noisy neighbour hits all alike;
# each row is the best of the rounds. Prints requests/s and latency per configuration, the
# ratio to no logging, and the records the server counted written and dropped.
#
#   bench/serving/run_request_log_bench.sh [BUILD_DIR]        (default: build)
#
# Environment: BENCH_DURATION_S (default 5) measured per row after BENCH_WARMUP_S (1);
# BENCH_ROUNDS (default 2); BENCH_CONCURRENCY (default 16).
#
# Exit status: 0 when every request was answered correctly, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/serving/lib.sh
source "$here/lib.sh"

build=${1:-build}
duration=${BENCH_DURATION_S:-5}
warmup=${BENCH_WARMUP_S:-1}
rounds=${BENCH_ROUNDS:-2}
concurrency=${BENCH_CONCURRENCY:-16}

die() {
  echo "run_request_log_bench: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_server=$build/server/model-server
load_gen=$build/bench/serving_load_gen
require_binaries "$model_cli" "$model_server" "$load_gen"

start_scratch
make_mlp784 "$tmp/mlp784"
x=$(mlp784_row)
body="{\"instances\": [[$x]]}"

# The config of setting $1: none, or a sampling rate.
write_config() {
  local logging=""
  if [[ $1 != none ]]; then
    logging="logging_config { log_collector_config { type: \"file\" filename_prefix: \"$tmp/logs/mlp784\" }
      sampling_config { sampling_rate: $1 } }"
  fi
  cat >"$tmp/models.config" <<EOF
model_config_list { config { name: "mlp784" base_path: "$tmp/mlp784" model_platform: "lockstep" $logging } }
EOF
}

results=$tmp/results
: >"$results"
failed=0
for ((round = 1; round <= rounds; round++)); do
  for setting in none 0.01 1.0; do
    rm -rf "$tmp/logs"
    write_config "$setting"
    start_server "s$round${setting//./_}" --model_config_file="$tmp/models.config" \
      --rest_api_num_threads="$(nproc)" --tensorflow_intra_op_parallelism=1
    name="s$round${setting//./_}"
    rest_var="port_${name}_rest" grpc_var="port_${name}_grpc" pid_var="pid_${name}"
    rest=${!rest_var} grpc=${!grpc_var} pid=${!pid_var}
    answer=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$rest/v1/models/mlp784:predict") ||
      die "model-server did not answer a predict"
    expect=$(grep -o '"classes": *[0-9]*' <<<"$answer" | grep -o '[0-9]*$') || die "no class in: $answer"
    for protocol in rest grpc; do
      port=$rest
      [[ $protocol == grpc ]] && port=$grpc
      row=$("$load_gen" --protocol="$protocol" --target="127.0.0.1:$port" --label="$setting" \
        --concurrency="$concurrency" --duration_s="$duration" --warmup_s="$warmup" --header=0 \
        --model=mlp784 --body="$body" --grpc_x="$x" --grpc_shape=1,784 --expect="$expect" \
        --rest_output=classes --output=classes) || failed=1
      echo "$row" >>"$results"
    done
    metrics=$(curl -sf "http://127.0.0.1:$rest/metrics")
    count() { awk -v key="lockstep_request_log_records_total{model=\"mlp784\",result=\"$1\"}" '$1 == key { print $2 }'; }
    written=$(count written <<<"$metrics")
    dropped=$(count dropped <<<"$metrics")
    echo "| $setting | records | ${written:-0} written, ${dropped:-0} dropped |" >>"$tmp/records"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done

echo "mlp784 predict with request logging, $(nproc) CPUs, concurrency $concurrency, ${duration} s per row, best of $rounds round(s)"
echo
echo "| sampling_rate | protocol | concurrency | requests/s | p50 µs | p90 µs | p99 µs | errors | vs none |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
# Best requests/s per (setting, protocol), then the ratio to the same protocol's none.
awk -F'|' '
  { setting = $2; protocol = $3; gsub(/ /, "", setting); gsub(/ /, "", protocol)
    key = setting "|" protocol; rps = $5 + 0
    if (!(key in best) || rps > best[key]) { best[key] = rps; line[key] = $0 } }
  END {
    n = split("none 0.01 1.0", settings, " ")
    for (p = 1; p <= 2; p++) {
      protocol = (p == 1) ? "rest" : "grpc"
      for (i = 1; i <= n; i++) {
        key = settings[i] "|" protocol
        if (!(key in best)) continue
        ratio = best["none|" protocol] > 0 ? best[key] / best["none|" protocol] : 0
        printf "%s %.2f |\n", line[key], ratio
      }
    }
  }' "$results"
echo
echo "Records each server counted (last round's servers last):"
cat "$tmp/records"
exit "$failed"
