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
require_binaries "$model_cli" "$model_server" "$load_gen"

start_scratch

make_mlp784 "$tmp/mlp784"
start_server server --model_name=mlp784 --model_base_path="$tmp/mlp784" \
  --rest_api_num_threads="$rest_threads" --tensorflow_intra_op_parallelism=1
# shellcheck disable=SC2154  # set by start_server
server_pid=$pid_server rest_port=$port_server_rest grpc_port=$port_server_grpc

x=$(mlp784_row)
body="{\"instances\": [[$x]]}"
# The class the server gives this row is the answer every request must get.
answer=$(curl -sf -X POST -d "$body" "http://127.0.0.1:$rest_port/v1/models/mlp784:predict") ||
  die "model-server did not answer a predict"
expect=$(grep -o '"classes": *[0-9]*' <<<"$answer" | grep -o '[0-9]*$') || die "no class in the answer: $answer"

# The server's CPU time so far, in clock ticks: utime + stime, fields 14 and 15 of
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
scrape() { curl -sf "http://127.0.0.1:$rest_port/metrics" || die "GET /metrics failed"; }
# The sum of metric $2's samples for protocol $3 in exposition file $1.
metric() {
  awk -v name="$2" -v protocol="protocol=\"$3\"" \
    'index($0, name "{") == 1 && index($0, protocol) { total += $NF } END { printf "%.9f\n", total }' "$1"
}
now_ns() { date +%s%N; }

# One load generator run; its row: | label | protocol | concurrency | requests/s | p50 | p90 | p99 | errors |
drive() {
  local protocol=$1 seconds=$2 port
  if [[ $protocol == rest ]]; then port=$rest_port; else port=$grpc_port; fi
  "$load_gen" --protocol="$protocol" --target="127.0.0.1:$port" --model=mlp784 --label=model-server \
    --concurrency="$concurrency" --duration_s="$seconds" --warmup_s=0 --header=0 \
    --body="$body" --grpc_x="$x" --grpc_shape=1,784 --expect="$expect" \
    --rest_output=classes --output=classes || die "the load generator failed ($protocol)"
}

results=$tmp/results
total_errors=0
for protocol in rest grpc; do
  drive "$protocol" "$warmup" >/dev/null
  # The scrape's own CPU is left out of the window: scraped before the first CPU reading and
  # after the second.
  scrape >"$tmp/before.prom"
  cpu_before=$(cpu_ticks)
  sched_threads >"$tmp/sched.before"
  start_ns=$(now_ns)
  drive "$protocol" "$duration" >"$tmp/$protocol.row"
  sleep 0.3  # calls the load generator gave up on at its end finish and are counted
  end_ns=$(now_ns)
  sched_threads >"$tmp/sched.after"
  cpu_after=$(cpu_ticks)
  scrape >"$tmp/after.prom"

  rate=$(awk -F '|' '{ print $5 + 0 }' "$tmp/$protocol.row")
  errors=$(awk -F '|' '{ print $9 + 0 }' "$tmp/$protocol.row")
  total_errors=$((total_errors + errors))
  requests=$(awk -v a="$(metric "$tmp/after.prom" lockstep_request_compute_seconds_count "$protocol")" \
    -v b="$(metric "$tmp/before.prom" lockstep_request_compute_seconds_count "$protocol")" 'BEGIN { print a - b }')
  run_s=$(awk -v a="$(metric "$tmp/after.prom" lockstep_request_compute_seconds_sum "$protocol")" \
    -v b="$(metric "$tmp/before.prom" lockstep_request_compute_seconds_sum "$protocol")" 'BEGIN { printf "%.9f", a - b }')
  ((requests > 0)) || die "no $protocol requests answered in the window"
  awk -v protocol="$protocol" -v requests="$requests" -v rate="$rate" -v run_s="$run_s" \
    -v errors="$errors" -v ticks="$((cpu_after - cpu_before))" -v tick="$ticks_per_s" \
    -v wall_ns="$((end_ns - start_ns))" -v wait="$(wait_share "$tmp/sched.before" "$tmp/sched.after")" '
    BEGIN {
      cpu = ticks / tick
      run_cpu = run_s * (1 - wait)
      printf "| %s | %d | %.0f | %.2f | %.0f | %.0f | %.0f | %.0f %% | %.0f | %.0f | %d |\n", protocol, requests,
        rate, cpu / (wall_ns / 1e9), cpu / requests * 1e6, run_s / requests * 1e6, (cpu - run_s) / requests * 1e6,
        wait * 100, run_cpu / requests * 1e6, (cpu - run_cpu) / requests * 1e6, errors
    }' >>"$results"
done

echo "mlp784 (784-1024-1024-10) predict, no batching, concurrency $concurrency, $cpus CPUs," \
  "${duration} s per protocol after ${warmup} s warm-up; REST threads $rest_threads, intra-op threads 1"
echo
echo "| protocol | requests | requests/s | server CPUs busy | CPU µs/request | Session::Run µs/request" \
  "| CPU µs outside Session::Run | waiting for a CPU | Session::Run CPU µs, est. | CPU µs outside, est. | errors |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
cat "$results"
if ((total_errors > 0)); then
  echo
  echo "errors: $total_errors (the load generator said what they were on stderr)"
  exit 1
fi
