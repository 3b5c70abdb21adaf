#!/usr/bin/env bash
# What a predict request costs model-server in CPU outside the model. model-server serves the
# MLP 784-1024-1024-10 (mlp784, as in run_batching_bench.sh) without batching; the load
# generator sends one 784-float row per request at a fixed concurrency, REST then gRPC. Over
# each measured window the script reads, before and after:
#   - the server process's CPU time, utime + stime from /proc/PID/stat (all its threads);
#   - from GET /metrics, lockstep_request_compute_seconds' _sum and _count for the protocol:
#     the time spent in Session::Run and the requests answered.
# Prints per request: server CPU µs, Session::Run µs, and their difference, the CPU spent
# outside Session::Run (HTTP or gRPC, JSON or protobuf, tensor conversion, routing, metrics).
# The load generator shares the machine; only the server's CPU is counted.
#
# The load generator's CPU per request (its user + system time over the requests answered) is
# in the "client" column: with the client on the same cores, it is part of what each request
# costs the machine.
#
# The transport's own cost is measured beside it, as the floor no server on it goes below: the
# plain Beast and callback gRPC peers (bench_plain_rest_server, bench_plain_grpc_server, no
# model store, no graph) and model-server, all on half_plus_two's one-number body, each
# server's CPU per request the same way (the peers' is all "outside Session::Run").
#
# The server runs with --tensorflow_intra_op_parallelism=1, so that Session::Run runs inline on
# the request's thread with no helper threads: its wall time (what the histogram holds) is then
# its CPU time, except for time its thread waits for a CPU while another thread runs. That
# wait is measured too: from /proc/PID/task/*/schedstat, the share of the server threads'
# runnable time spent waiting for a CPU. The last two columns assume Session::Run waits that
# share of its wall time like the rest of the request, and take it out: Session::Run's CPU,
# estimated, and the CPU outside it, estimated. On an otherwise idle machine the share is small
# and the two pairs of columns agree; where they differ, the estimated pair is the better one.
#
#   bench/serving/run_request_cost.sh [BUILD_DIR]        (default: build)
#
# Environment:
#   BENCH_DURATION_S    seconds measured per protocol (default 10), after BENCH_WARMUP_S (2)
#                       of unmeasured load
#   BENCH_CONCURRENCY   requests kept outstanding (default 16)
#   BENCH_REST_THREADS  model-server's REST threads (default: one per CPU, as run_batching_bench.sh)
#
# Exit status: 0 when everything ran without errors, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/serving/lib.sh
source "$here/lib.sh"

build=${1:-build}
duration=${BENCH_DURATION_S:-10}
warmup=${BENCH_WARMUP_S:-2}
concurrency=${BENCH_CONCURRENCY:-16}
cpus=$(nproc)
rest_threads=${BENCH_REST_THREADS:-$cpus}
ticks_per_s=$(getconf CLK_TCK)

die() {
  echo "run_request_cost: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_server=$build/server/model-server
load_gen=$build/bench/serving_load_gen
plain_rest=$build/bench/bench_plain_rest_server
plain_grpc=$build/bench/bench_plain_grpc_server
require_binaries "$model_cli" "$model_server" "$load_gen" "$plain_rest" "$plain_grpc"

start_scratch

make_mlp784 "$tmp/mlp784"
start_server server --model_name=mlp784 --model_base_path="$tmp/mlp784" \
  --rest_api_num_threads="$rest_threads" --tensorflow_intra_op_parallelism=1
# shellcheck disable=SC2154  # set by start_server
mlp_pid=$pid_server mlp_rest=$port_server_rest mlp_grpc=$port_server_grpc
"$model_cli" make-example half_plus_two --out "$tmp/half_plus_two/1" >/dev/null || die "model-cli failed"
start_server small --model_name=half_plus_two --model_base_path="$tmp/half_plus_two" \
  --rest_api_num_threads="$rest_threads" --tensorflow_intra_op_parallelism=1
# shellcheck disable=SC2154  # set by start_server
small_pid=$pid_small small_rest=$port_small_rest small_grpc=$port_small_grpc
start_peer plain_rest "$plain_rest" --threads="$rest_threads"
plain_rest_pid=$peer_pid plain_rest_port=$peer_port
start_peer plain_grpc "$plain_grpc" --threads="$rest_threads" --api=callback
plain_grpc_pid=$peer_pid plain_grpc_port=$peer_port

x=$(mlp784_row)
body="{\"instances\": [[$x]]}"
# The class the server gives this row is the answer every request must get.
answer=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$mlp_rest/v1/models/mlp784:predict") ||
  die "model-server did not answer a predict"
expect=$(grep -o '"classes": *[0-9]*' <<<"$answer" | grep -o '[0-9]*$') || die "no class in the answer: $answer"

# Server $server_pid's CPU time so far, in clock ticks: utime + stime, fields 14 and 15 of
# /proc/PID/stat (counted after the ") " that ends the command name, which may hold spaces).
cpu_ticks() {
  awk '{ sub(/^.*\) /, ""); split($0, f, " "); print f[12] + f[13] }' "/proc/$server_pid/stat"
}
# "TID CPU_NS WAIT_NS" for each thread of the server: /proc/PID/task/TID/schedstat's time on a
# CPU and time runnable but waiting for one. A thread that exits as it is read is skipped.
sched_threads() {
  local file tid cpu wait
  for file in /proc/"$server_pid"/task/*/schedstat; do
    tid=${file%/schedstat}
    tid=${tid##*/}
    if read -r cpu wait _ 2>/dev/null <"$file"; then echo "$tid $cpu $wait"; fi
  done
}
# The share of the server threads' runnable time spent waiting for a CPU between the
# sched_threads outputs $1 and $2 (a thread started in between counts from zero; one that
# exited in between is left out).
wait_share() {
  awk 'NR == FNR { cpu[$1] = $2; wait[$1] = $3; next }
    { on += $2 - cpu[$1]; off += $3 - wait[$1] }
    END { printf "%.4f\n", (on + off > 0) ? off / (on + off) : 0 }' "$1" "$2"
}
# model-server's metrics, or none for a peer (no metrics port): then no Session::Run.
scrape() {
  if [[ -n $metrics_port ]]; then curl -sf "http://127.0.0.1:$metrics_port/metrics" || die "GET /metrics failed"; fi
}
# The sum of metric $2's samples for protocol $3 in exposition file $1.
metric() {
  awk -v name="$2" -v protocol="protocol=\"$3\"" \
    'index($0, name "{") == 1 && index($0, protocol) { total += $NF } END { printf "%.9f\n", total }' "$1"
}
now_ns() { date +%s%N; }

# One load generator run against $port for $1 seconds; its row: | label | protocol |
# concurrency | requests/s | p50 | p90 | p99 | errors |. The load is $load (mlp784 or small).
drive() {
  local seconds=$1
  local args=(--protocol="$protocol" --target="127.0.0.1:$port" --label=x --concurrency="$concurrency"
    --duration_s="$seconds" --warmup_s=0 --header=0)
  if [[ $load == mlp784 ]]; then
    args+=(--model=mlp784 --body="$body" --grpc_x="$x" --grpc_shape=1,784 --expect="$expect"
      --rest_output=classes --output=classes)
  fi
  # Its CPU time (user, system) goes to $tmp/client.cpu.
  local TIMEFORMAT='%U %S'
  { time "$load_gen" "${args[@]}" 2>"$tmp/client.err"; } 2>"$tmp/client.cpu" ||
    die "the load generator failed ($label, $protocol): $(cat "$tmp/client.err")"
}

# Measures server $server_pid (model-server when $metrics_port is set) under load $load on
# $protocol at $port; appends its row to $results.
measure() {
  drive "$warmup" >/dev/null
  # The scrape's own CPU is left out of the window: scraped before the first CPU reading and
  # after the second.
  scrape >"$tmp/before.prom"
  cpu_before=$(cpu_ticks)
  sched_threads >"$tmp/sched.before"
  start_ns=$(now_ns)
  drive "$duration" >"$tmp/run.row"
  sleep 0.3  # calls the load generator gave up on at its end finish and are counted
  end_ns=$(now_ns)
  sched_threads >"$tmp/sched.after"
  cpu_after=$(cpu_ticks)
  scrape >"$tmp/after.prom"

  rate=$(awk -F '|' '{ print $5 + 0 }' "$tmp/run.row")
  errors=$(awk -F '|' '{ print $9 + 0 }' "$tmp/run.row")
  total_errors=$((total_errors + errors))
  if [[ -n $metrics_port ]]; then
    requests=$(awk -v a="$(metric "$tmp/after.prom" lockstep_request_compute_seconds_count "$protocol")" \
      -v b="$(metric "$tmp/before.prom" lockstep_request_compute_seconds_count "$protocol")" 'BEGIN { print a - b }')
    run_s=$(awk -v a="$(metric "$tmp/after.prom" lockstep_request_compute_seconds_sum "$protocol")" \
      -v b="$(metric "$tmp/before.prom" lockstep_request_compute_seconds_sum "$protocol")" 'BEGIN { printf "%.9f", a - b }')
  else
    # A peer keeps no count: the requests the load generator saw answered in the window.
    requests=$(awk -v rate="$rate" -v wall_ns="$((end_ns - start_ns))" 'BEGIN { printf "%d", rate * (wall_ns - 3e8) / 1e9 }')
    run_s=0
  fi
  ((requests > 0)) || die "no $protocol requests answered in the window ($label)"
  client_s=$(awk '{ print $1 + $2 }' "$tmp/client.cpu")
  awk -v label="$label" -v protocol="$protocol" -v requests="$requests" -v rate="$rate" -v run_s="$run_s" \
    -v errors="$errors" -v ticks="$((cpu_after - cpu_before))" -v tick="$ticks_per_s" -v client_s="$client_s" \
    -v wall_ns="$((end_ns - start_ns))" -v wait="$(wait_share "$tmp/sched.before" "$tmp/sched.after")" '
    BEGIN {
      cpu = ticks / tick
      run_cpu = run_s * (1 - wait)
      printf "| %s | %s | %d | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f %% | %.0f | %.0f | %.0f | %d |\n", label,
        protocol, requests, rate, cpu / (wall_ns / 1e9), cpu / requests * 1e6, run_s / requests * 1e6,
        (cpu - run_s) / requests * 1e6, wait * 100, run_cpu / requests * 1e6, (cpu - run_cpu) / requests * 1e6,
        client_s / requests * 1e6, errors
    }' >>"$results"
}

results=$tmp/results
total_errors=0
# label:load:server pid:port:metrics port (empty for a peer), REST then gRPC for each server.
runs=(
  "model-server, mlp784:mlp784:$mlp_pid:$mlp_rest:$mlp_rest:rest"
  "model-server, mlp784:mlp784:$mlp_pid:$mlp_grpc:$mlp_rest:grpc"
  "model-server, half_plus_two:small:$small_pid:$small_rest:$small_rest:rest"
  "plain Beast peer, half_plus_two:small:$plain_rest_pid:$plain_rest_port::rest"
  "model-server, half_plus_two:small:$small_pid:$small_grpc:$small_rest:grpc"
  "plain callback gRPC peer, half_plus_two:small:$plain_grpc_pid:$plain_grpc_port::grpc"
)
for run in "${runs[@]}"; do
  IFS=: read -r label load server_pid port metrics_port protocol <<<"$run"
  measure
done

echo "Predict, no batching, concurrency $concurrency, $cpus CPUs, ${duration} s per row after ${warmup} s" \
  "warm-up; REST threads $rest_threads (the peers too), intra-op threads 1. mlp784: the MLP" \
  "784-1024-1024-10 on a 784-float row; half_plus_two: one number, the transport's floor."
echo
echo "| server, model | protocol | requests | requests/s | server CPUs busy | CPU µs/request" \
  "| Session::Run µs/request | CPU µs outside Session::Run | waiting for a CPU | Session::Run CPU µs, est." \
  "| CPU µs outside, est. | client CPU µs/request | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
cat "$results"
if ((total_errors > 0)); then
  echo
  echo "errors: $total_errors (the load generator said what they were on stderr)"
  exit 1
fi
