#!/usr/bin/env bash
# Time to a servable version, from a warm page cache: bench_load on model-cli's 128 MiB
# large_matmul and on a 1 GiB bundle it writes (y = x W, W 16384 x 16384 float32), beside
# SHA-256 and a plain read of the same bytes, each as written (weight shards) and as one file;
# then model-server loading large_matmul both ways, with the load_s its log reports (the
# manager's time, to AVAILABLE), best of BENCH_SERVER_LOADS starts.
#
#   bench/runtime/run_load_bench.sh [BUILD_DIR]        (default: build)
#
# Environment: BENCH_REPEATS (bench_load's runs per figure, default 5), BENCH_SERVER_LOADS
# (default 3), BENCH_SKIP_GIB=1 leaves out the 1 GiB bundle (it needs about 4 GiB of memory).
# shellcheck disable=SC2154  # $tmp and $pid_large are set by bench/serving/lib.sh
set -euo pipefail

build=${1:-build}
die() {
  echo "run_load_bench: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_server=$build/server/model-server
bench_load=$build/bench/bench_load
# shellcheck source=bench/serving/lib.sh
source "$(dirname "$0")/../serving/lib.sh"
require_binaries "$model_cli" "$model_server" "$bench_load"
start_scratch

"$model_cli" make-example large_matmul --out "$tmp/large/1" >/dev/null
args=(--out "$tmp" --repeats "${BENCH_REPEATS:-5}" --bundle "$tmp/large/1")
[[ ${BENCH_SKIP_GIB:-0} == 1 ]] || args+=(--width 16384)
# Without the reader's own log lines, one per bundle read.
"$bench_load" "${args[@]}" | grep -v "\] \[info\] "

# The server's load_s for large_matmul as written (4 shards) and as one file (bench_load's twin).
server_loads() {
  local base=$1 best="" s i t bytes
  for ((i = 0; i < ${BENCH_SERVER_LOADS:-3}; i++)); do
    start_server large --model_name=large --model_base_path="$base"
    for ((t = 0; t < 100; t++)); do
      grep -q "event=version_available" "$tmp/large.log" && break
      sleep 0.1
    done
    s=$(grep -o "load_s=[0-9.]*" "$tmp/large.log" | head -n 1 | cut -d= -f2) || true
    [[ -n $s ]] || die "large_matmul did not load from $base: $(tail -n 5 "$tmp/large.log")"
    kill "$pid_large"
    wait "$pid_large" 2>/dev/null || true
    echo "model-server: $base version 1 AVAILABLE after load_s=$s"
    if [[ -z $best ]] || awk -v a="$s" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$s; fi
  done
  bytes=$(cat "$base"/1/weights*.bin | wc -c)
  awk -v s="$best" -v b="$bytes" -v d="$base" 'BEGIN { printf "model-server on %s, best load_s %.3f: %.2f GB/s\n", d, s, b / s / 1e9 }'
}
server_loads "$tmp/large"
server_loads "$tmp/large-one-file"
