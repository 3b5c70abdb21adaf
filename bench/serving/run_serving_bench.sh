#!/usr/bin/env bash
# model-server's predict throughput on half_plus_two, REST and gRPC, next to the plain peers
# (bench_plain_rest_server, bench_plain_grpc_server: the same arithmetic and encoding with no
# model store), all measured in this one run: shared machines are noisy, and only ratios taken
# side by side mean anything. gRPC has two peers: "plain peer" on gRPC's synchronous API (as
# model-server), "plain callback peer" on its callback (reactor) API. Prints one Markdown
# table; "vs plain" is model-server's requests/s over the plain peer's at the same protocol and
# concurrency, "vs callback peer" (gRPC rows) over the callback peer's.
#
#   bench/serving/run_serving_bench.sh [BUILD_DIR]        (default: build)
#
# Environment:
#   BENCH_DURATION_S    seconds measured per level (default 5), after BENCH_WARMUP_S (1)
#   BENCH_CONCURRENCY   levels, comma-separated (default 1,16,64)
#   BENCH_ROUNDS        times the whole set is run (default 1); each row then shows the round
#                       with the most requests/s and the errors of all rounds: on a busy
#                       machine, other load only ever lowers throughput, so the best round is
#                       the closest to what the server can do
#   BENCH_REST_THREADS  REST threads, model-server and peer alike (default: one per CPU)
#   BENCH_GRPC_THREADS  gRPC max threads, model-server and peers alike (default: the larger of
#                       4 per CPU, TensorFlow Serving's default, and twice the highest level,
#                       because a synchronous gRPC server holds a thread per call in flight and
#                       answers RESOURCE_EXHAUSTED when the quota runs out; the callback peer
#                       takes the flag but runs its calls on gRPC's own threads)
#   BENCH_START_TIMEOUT_S  how long model-server may take to serve the model (default 60)
#
# Exit status: 0 when everything ran without errors, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
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
grpc_threads=${BENCH_GRPC_THREADS:-$((4 * cpus > 2 * highest ? 4 * cpus : 2 * highest))}
start_timeout=${BENCH_START_TIMEOUT_S:-60}

die() {
  echo "run_serving_bench: $*" >&2
  exit 1
}

# The first of the candidate paths that is an executable.
find_bin() {
  local candidate
  for candidate in "$@"; do
    if [[ -x $candidate ]]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

model_cli=$(find_bin "$build/model-cli" "$build/runtime/cli/model-cli") ||
  die "no model-cli under $build"
model_server=$(find_bin "$build/model-server" "$build/server/model-server") ||
  die "no model-server under $build"
load_gen=$(find_bin "$build/bench/serving_load_gen") || die "no bench/serving_load_gen under $build"
plain_rest=$(find_bin "$build/bench/bench_plain_rest_server") ||
  die "no bench/bench_plain_rest_server under $build"
plain_grpc=$(find_bin "$build/bench/bench_plain_grpc_server") ||
  die "no bench/bench_plain_grpc_server under $build"

start_scratch

# GET $2 from 127.0.0.1:$1; prints the whole response, or nothing if none came.
http_get() {
  # shellcheck disable=SC2016  # $1 and $2 are the inner shell's, passed as arguments
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" "$2" >&3
    cat <&3' _ "$1" "$2" 2>/dev/null || true
}


# Starts model-server on two random free high ports and waits until the model is AVAILABLE;
# sets grpc_port and rest_port. A port taken between the check and the bind makes the server
# exit at once, which is retried on other ports.
start_model_server() {
  local attempt
  for ((attempt = 0; attempt < 5; attempt++)); do
    grpc_port=$((20000 + RANDOM % 40000))
    rest_port=$((grpc_port + 1))
    if port_in_use "$grpc_port" || port_in_use "$rest_port"; then continue; fi
    "$model_server" --port="$grpc_port" --rest_api_port="$rest_port" \
      --model_name=half_plus_two --model_base_path="$tmp/half_plus_two" \
      --rest_api_num_threads="$rest_threads" --grpc_max_threads="$grpc_threads" \
      >"$tmp/model-server.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    local deadline=$((SECONDS + start_timeout))
    while ((SECONDS < deadline)) && kill -0 "$pid" 2>/dev/null; do
      if http_get "$rest_port" /v1/models/half_plus_two | grep -q '"AVAILABLE"'; then return 0; fi
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      die "model-server did not make half_plus_two AVAILABLE in ${start_timeout} s: $(tail -n 20 "$tmp/model-server.log")"
    fi
  done
  die "model-server would not start: $(tail -n 20 "$tmp/model-server.log")"
}

"$model_cli" make-example half_plus_two --out "$tmp/half_plus_two/1" >/dev/null ||
  die "model-cli could not write the half_plus_two bundle"
start_peer plain_rest "$plain_rest" --threads="$rest_threads"
plain_rest_port=$peer_port
start_peer plain_grpc "$plain_grpc" --threads="$grpc_threads" --api=sync
plain_grpc_port=$peer_port
start_peer plain_grpc_callback "$plain_grpc" --threads="$grpc_threads" --api=callback
plain_grpc_callback_port=$peer_port
start_model_server

# Peer and model-server take turns level by level, so that drift in the machine's load
# affects both sides of each ratio alike.
rows=$tmp/rows
for ((round = 0; round < rounds; round++)); do
  for protocol in rest grpc; do
    if [[ $protocol == rest ]]; then
      sides=("plain peer:$plain_rest_port" "model-server:$rest_port")
    else
      sides=("plain peer:$plain_grpc_port" "plain callback peer:$plain_grpc_callback_port"
        "model-server:$grpc_port")
    fi
    for level in ${levels//,/ }; do
      for side in "${sides[@]}"; do
        "$load_gen" --protocol="$protocol" --target="127.0.0.1:${side##*:}" --label="${side%:*}" \
          --concurrency="$level" --duration_s="$duration" --warmup_s="$warmup" --header=0 \
          >>"$rows" || die "the load generator failed against ${side%:*} ($protocol)"
      done
    done
  done
done

echo "half_plus_two predict, $cpus CPUs, ${duration} s per level after ${warmup} s warm-up," \
  "best of $rounds round(s); REST threads $rest_threads, gRPC max threads $grpc_threads"
echo
awk -f "$here/best_rounds.awk" "$rows" | awk -F '|' '
  {
    for (i = 2; i <= 9; i++) gsub(/^ +| +$/, "", $i)
    key = $2 "|" $3 "|" $4
    order[++n] = key
    rps[key] = $5 + 0
    errors[key] = $9
    total_errors += $9
    row[key] = $2 " | " $3 " | " $4 " | " $5 " | " $6 " | " $7 " | " $8
  }
  END {
    print "| server | protocol | concurrency | requests/s | p50 µs | p90 µs | p99 µs | errors | vs plain | vs callback peer |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= n; i++) {
      key = order[i]
      split(key, part, "|")
      peer = "plain peer|" part[2] "|" part[3]
      callback = "plain callback peer|" part[2] "|" part[3]
      ratio = "—"
      callback_ratio = "—"
      if (part[1] == "model-server" && rps[peer] > 0) {
        ratio = sprintf("%.2f", rps[key] / rps[peer])
        compared++
        if (rps[key] >= 0.85 * rps[peer]) met++
      }
      if (part[1] == "model-server" && rps[callback] > 0) callback_ratio = sprintf("%.2f", rps[key] / rps[callback])
      print "| " row[key] " | " errors[key] " | " ratio " | " callback_ratio " |"
    }
    printf "\nmodel-server at >= 0.85 of the plain peer: %d of %d levels\n", met, compared
    if (total_errors > 0) printf "errors: %d (the load generator said what they were on stderr)\n", total_errors
    exit (total_errors > 0)
  }' 
