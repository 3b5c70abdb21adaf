#!/usr/bin/env bash
# What the Open Inference Protocol (KServe v2) costs next to TF Serving's API: half_plus_two
# (input "x" FP32 [3], output "y") on ONE model-server, asked the same thing five ways per
# concurrency level:
#   REST  TF API :predict   POST /v1/models/half_plus_two:predict, {"instances": [...]}
#   REST  v2 JSON           POST /v2/models/half_plus_two/infer, the input in "data"
#   REST  v2 binary         the same, input and output as raw bytes after a JSON header
#   gRPC  TF API Predict    PredictionService/Predict, float_val
#   gRPC  v2 ModelInfer     GRPCInferenceService/ModelInfer, raw_input_contents
# Every answer is checked. The five take turns level by level, so that drift in the machine's
# load affects every side of a ratio alike. Prints one Markdown table; "v2 / TF API" is a v2
# row's requests/s over the TF API's on the same transport at the same level.
#
#   bench/serving/run_v2_bench.sh [BUILD_DIR]        (default: build)
#
# Environment:
#   BENCH_DURATION_S    seconds measured per row (default 5), after BENCH_WARMUP_S (1)
#   BENCH_CONCURRENCY   levels, comma-separated (default 1,16,64)
#   BENCH_ROUNDS        times the whole set is run (default 1); each row then shows its best
#                       round and the errors of all rounds (best_rounds.awk says why)
#   BENCH_REST_THREADS  model-server's REST threads (default: one per CPU), as in
#                       run_serving_bench.sh
#   BENCH_GRPC_THREADS  its gRPC max threads (default: the larger of 4 per CPU and twice the
#                       highest level), as in run_serving_bench.sh
#   BENCH_MODEL         half_plus_two (default), or mlp784: the MLP 784-1024-1024-10 of
#                       run_request_cost.sh on one row of 784 floats (output "classes", INT64),
#                       where the request's encoding is a larger share of the work
#
# Exit status: 0 when everything ran without errors, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../.."
# shellcheck source=bench/serving/lib.sh
source "$here/lib.sh"

build=${1:-build}
duration=${BENCH_DURATION_S:-5}
warmup=${BENCH_WARMUP_S:-1}
levels=${BENCH_CONCURRENCY:-1,16,64}
rounds=${BENCH_ROUNDS:-1}
cpus=$(nproc)
highest=$(tr ',' '\n' <<<"$levels" | sort -n | tail -n 1)
rest_threads=${BENCH_REST_THREADS:-$cpus}
model=${BENCH_MODEL:-half_plus_two}
grpc_threads=${BENCH_GRPC_THREADS:-$((4 * cpus > 2 * highest ? 4 * cpus : 2 * highest))}

die() {
  echo "run_v2_bench: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_server=$build/server/model-server
load_gen=$build/bench/serving_load_gen
require_binaries "$model_cli" "$model_server" "$load_gen"

start_scratch

# The defaults of the load generator are half_plus_two's: x = [1, 2, 5] (the TF API's body
# too), y = x/2 + 2. The MLP's answer to its row is read from the server once, and every request
# must get it.
model_args=()
case $model in
  half_plus_two)
    "$model_cli" make-example half_plus_two --out "$tmp/half_plus_two/1" >/dev/null ||
      die "model-cli could not write the half_plus_two bundle" ;;
  mlp784) make_mlp784 "$tmp/mlp784" ;;
  *) die "BENCH_MODEL must be half_plus_two or mlp784, not '$model'" ;;
esac
start_server ms --model_name="$model" --model_base_path="$tmp/$model" \
  --rest_api_num_threads="$rest_threads" --grpc_max_threads="$grpc_threads"
# shellcheck disable=SC2154  # port_ms_rest, port_ms_grpc: set by start_server
rest_port=$port_ms_rest grpc_port=$port_ms_grpc
# A server without the v2 API would make every v2 row a column of errors: say so once instead.
curl -sf "http://127.0.0.1:$rest_port/v2/models/$model/ready" >/dev/null ||
  die "model-server does not say $model is ready on /v2/models/$model/ready"
if [[ $model == mlp784 ]]; then
  x=$(mlp784_row)
  body="{\"instances\": [[$x]]}"
  answer=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$rest_port/v1/models/mlp784:predict") ||
    die "model-server did not answer a predict"
  expect=$(grep -o '"classes": *[0-9]*' <<<"$answer" | grep -o '[0-9]*$') || die "no class in the answer: $answer"
  # shellcheck disable=SC2054  # --grpc_shape takes a comma-separated list
  model_args=(--model=mlp784 --body="$body" --grpc_x="$x" --grpc_shape=1,784 --expect="$expect"
    --rest_output=classes --output=classes)
fi

# protocol:api:label, in the table's order. The label is what the table shows as the API.
sides=("rest:tfs:TF API :predict" "rest:v2:v2 JSON" "rest:v2_binary:v2 binary"
  "grpc:tfs:TF API Predict" "grpc:v2:v2 ModelInfer")
rows=$tmp/rows
for ((round = 0; round < rounds; round++)); do
  for level in ${levels//,/ }; do
    for side in "${sides[@]}"; do
      IFS=: read -r protocol api label <<<"$side"
      port=$rest_port
      [[ $protocol == grpc ]] && port=$grpc_port
      "$load_gen" --protocol="$protocol" --api="$api" --target="127.0.0.1:$port" --label="$label" \
        --concurrency="$level" --duration_s="$duration" --warmup_s="$warmup" --header=0 "${model_args[@]}" \
        >>"$rows" || die "the load generator failed ($label over $protocol)"
    done
  done
done

echo "$model on one model-server, TF Serving's API against the Open Inference Protocol," \
  "$cpus CPUs, ${duration} s per row after ${warmup} s warm-up, best of $rounds round(s);" \
  "REST threads $rest_threads, gRPC max threads $grpc_threads"
echo
# best_rounds.awk's rows: | label | protocol (e.g. "rest v2_binary") | concurrency | requests/s
# | p50 | p90 | p99 | errors |. The TF API's rows have the bare transport as their protocol.
awk -f "$here/best_rounds.awk" "$rows" | awk -F '|' '
  {
    for (i = 2; i <= 9; i++) gsub(/^ +| +$/, "", $i)
    split($3, protocol, " ")
    transport = protocol[1] == "rest" ? "REST" : "gRPC"
    key = transport "|" $2 "|" $4
    order[++n] = key
    tfs[key] = protocol[2] == ""
    rps[key] = $5 + 0
    errors[key] = $9
    total_errors += $9
    row[key] = transport " | " $2 " | " $4 " | " $5 " | " $6 " | " $7 " | " $8 " | " $9
    if (tfs[key]) baseline[transport "|" $4] = $5 + 0
  }
  END {
    print "| transport | API | concurrency | requests/s | p50 µs | p90 µs | p99 µs | errors | v2 / TF API |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= n; i++) {
      key = order[i]
      split(key, part, "|")
      ratio = "—"
      base = baseline[part[1] "|" part[3]]
      if (!tfs[key] && base > 0) ratio = sprintf("%.2f", rps[key] / base)
      print "| " row[key] " | " ratio " |"
    }
    if (total_errors > 0) printf "\nerrors: %d (the load generator said what they were on stderr)\n", total_errors
    exit (total_errors > 0)
  }'
