#!/usr/bin/env bash
# What loading a large version does to the models already serving: model-server serves
# half_plus_two; the load generator measures its p99 first with nothing loading (the peer,
# in the same run), then while versions of a 128 MiB bundle (model-cli's large_matmul) arrive
# in another model's base path one after another and load. Prints both rows and the ratio of
# the p99s; the target is at most 1.5.
#
#   bench/serving/run_load_isolation.sh [BUILD_DIR]        (default: build)
#
# Environment: BENCH_DURATION_S (default 8), BENCH_CONCURRENCY (one level, default 8),
# BENCH_LOADS (versions loaded during the measurement, default 3).
set -euo pipefail

build=${1:-build}
duration=${BENCH_DURATION_S:-8}
concurrency=${BENCH_CONCURRENCY:-8}
loads=${BENCH_LOADS:-3}
die() {
  echo "run_load_isolation: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_server=$build/server/model-server
load_gen=$build/bench/serving_load_gen
for bin in "$model_cli" "$model_server" "$load_gen"; do [[ -x $bin ]] || die "no $bin (build first)"; done

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

"$model_cli" make-example half_plus_two --out "$tmp/half_plus_two/1" >/dev/null
mkdir -p "$tmp/large" "$tmp/staging"
for ((v = 1; v <= loads; v++)); do
  "$model_cli" make-example large_matmul --out "$tmp/staging/$v" >/dev/null
done
cat >"$tmp/models.config" <<CONFIG
model_config_list {
  config { name: "half_plus_two" base_path: "$tmp/half_plus_two" }
  config { name: "large" base_path: "$tmp/large" }
}
CONFIG

port=$((20000 + RANDOM % 40000))
"$model_server" --port=0 --rest_api_port="$port" --model_config_file="$tmp/models.config" \
  --file_system_poll_wait_seconds=1 >"$tmp/server.log" 2>&1 &
server_pid=$!
for ((i = 0; i < 100; i++)); do
  grep -q "event=server_ready" "$tmp/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || die "model-server exited: $(tail -n 5 "$tmp/server.log")"
  sleep 0.1
done

# One load generator row: | label | protocol | concurrency | requests/s | p50 | p90 | p99 | errors |
measure() {
  "$load_gen" --protocol=rest --target="127.0.0.1:$port" --concurrency="$concurrency" \
    --duration_s="$duration" --warmup_s=1 --label="$1" --header=0
}

baseline=$(measure "nothing loading")
# During the second measurement, a new version lands every duration/(loads+1) seconds.
(
  sleep 1.5
  for ((v = 1; v <= loads; v++)); do
    mv "$tmp/staging/$v" "$tmp/large/$v"
    sleep "$(awk -v d="$duration" -v n="$loads" 'BEGIN { print d / (n + 1) }')"
  done
) &
loader_pid=$!
during=$(measure "${loads} loads of 128 MiB")
wait "$loader_pid"
loaded=$(grep -c "event=version_available model=large" "$tmp/server.log" || true)
load_s=$(grep -o "model=large version=[0-9]* load_s=[0-9.]*" "$tmp/server.log" | sed 's/.*load_s=//' | paste -sd, -)

echo "| label | protocol | concurrency | requests/s | p50 µs | p90 µs | p99 µs | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
echo "$baseline"
echo "$during"
p99_base=$(awk -F'|' '{ gsub(/ /, "", $8); print $8 }' <<<"$baseline")
p99_during=$(awk -F'|' '{ gsub(/ /, "", $8); print $8 }' <<<"$during")
echo
echo "versions of 'large' loaded during the measurement: $loaded (load_s: ${load_s:-none})"
awk -v a="$p99_during" -v b="$p99_base" 'BEGIN { r = a / b; printf "p99 while loading / p99 at rest: %.2fx [target <= 1.5] %s\n", r, (r <= 1.5 ? "met" : "MISSED") }'
[[ $loaded -eq $loads ]] || die "only $loaded of $loads versions loaded during the measurement"
