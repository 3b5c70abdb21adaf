#!/usr/bin/env bash
# The soak: model-server under mixed REST and gRPC load at 80% of its measured peak for ten
# minutes, while a new version rolls out every 30 s, the config file changes every minute and
# /metrics is scraped every 10 s. Passes when no request and no scrape fails and resident
# memory at the end is within 3% (SOAK_MAX_GROWTH_PERCENT) of its value after the first minute.
#
#   bench/soak/run_soak.sh [BUILD_DIR] [MINUTES]     (defaults: build, 10)
#
# Every answer is checked (y = 0.5 x + 2: each version is the same half_plus_two, so a wrong
# answer is a failure, whichever version gave it). Writes its log and the server's to
# $SOAK_OUT (default: a temporary directory, printed).
set -euo pipefail
cd "$(dirname "$0")/../.."

build="${1:-build}"
minutes="${2:-10}"
seconds=$((minutes * 60))
server="$build/server/model-server"
load_gen="$build/bench/serving_load_gen"
cli="$build/runtime/cli/model-cli"
for f in "$server" "$load_gen" "$cli"; do
  [ -x "$f" ] || { echo "run_soak.sh: $f is missing; build first (cmake --build $build)" >&2; exit 2; }
done

out="${SOAK_OUT:-$(mktemp -d /tmp/lockstep-soak.XXXXXX)}"
mkdir -p "$out"
models="$out/models/hpt"
mkdir -p "$models"
"$cli" make-example half_plus_two --out "$out/template" > /dev/null
cp -r "$out/template" "$models/1"

config="$out/models.config"
write_config() {  # $1: how many of the newest versions to serve
  cat > "$config.new" <<CONFIG
model_config_list {
  config {
    name: "hpt"
    base_path: "$models"
    model_platform: "tensorflow"
    model_version_policy { latest { num_versions: $1 } }
  }
}
CONFIG
  mv "$config.new" "$config"
}
write_config 1

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
grpc_port=$(free_port)
rest_port=$(free_port)
"$server" --port="$grpc_port" --rest_api_port="$rest_port" --model_config_file="$config" \
  --model_config_file_poll_wait_seconds=5 --file_system_poll_wait_seconds=1 > "$out/server.log" 2>&1 &
server_pid=$!
cleanup() { kill "$server_pid" 2> /dev/null || true; jobs -p | xargs -r kill 2> /dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do grep -q "event=server_ready" "$out/server.log" && break; sleep 0.1; done
grep -q "event=server_ready" "$out/server.log" || { cat "$out/server.log" >&2; exit 1; }

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }
common=(--model=hpt --body='{"instances": [1.0, 2.0, 5.0]}' --grpc_x=1,2,5 --expect=2.5,3.0,4.5 --header=0)
requests_per_s() { awk -F'|' '{gsub(/ /, "", $5); print $5}'; }

echo "measuring the peak (5 s each, concurrency 16)"
peak_rest=$("$load_gen" --protocol=rest --target="127.0.0.1:$rest_port" "${common[@]}" --concurrency=16 \
  --duration_s=5 --label=peak | requests_per_s)
peak_grpc=$("$load_gen" --protocol=grpc --target="127.0.0.1:$grpc_port" "${common[@]}" --concurrency=16 \
  --duration_s=5 --label=peak | requests_per_s)
# Each protocol alone reaches its peak on the whole machine; together at 40% of each, the
# load is 80% of what the machine serves.
rate_rest=$(awk -v p="$peak_rest" 'BEGIN {printf "%d", p * 0.4}')
rate_grpc=$(awk -v p="$peak_grpc" 'BEGIN {printf "%d", p * 0.4}')
echo "peak: REST $peak_rest/s, gRPC $peak_grpc/s; soak: REST $rate_rest/s + gRPC $rate_grpc/s for $seconds s"

"$load_gen" --protocol=rest --target="127.0.0.1:$rest_port" "${common[@]}" --concurrency=64 \
  --rate="$rate_rest" --duration_s="$seconds" --warmup_s=0 --label=soak > "$out/rest.txt" 2> "$out/rest.err" &
rest_pid=$!
"$load_gen" --protocol=grpc --target="127.0.0.1:$grpc_port" "${common[@]}" --concurrency=64 \
  --rate="$rate_grpc" --duration_s="$seconds" --warmup_s=0 --label=soak > "$out/grpc.txt" 2> "$out/grpc.err" &
grpc_pid=$!

# Every 10 s: resident memory, and a scrape of /metrics as Prometheus would make (every scrape
# must succeed; its series are counted, since gone versions' series must not pile up). Every
# 30 s: a new version (written beside, renamed into place; the two newest kept). Every 60 s:
# the config flips between serving the newest one and two.
rss_at_1min=""
version=1
scrape_failures=0
printf 'seconds\trss_kib\tseries\n' > "$out/rss.tsv"
for ((t = 10; t <= seconds; t += 10)); do
  sleep 10
  rss=$(rss_kib)
  if curl -sf --max-time 10 "http://127.0.0.1:$rest_port/metrics" > "$out/metrics.txt"; then
    series=$(grep -vc '^#' "$out/metrics.txt" || true)
  else
    series=0
    scrape_failures=$((scrape_failures + 1))
  fi
  printf '%d\t%d\t%d\n' "$t" "$rss" "$series" >> "$out/rss.tsv"
  [ "$t" -eq 60 ] && rss_at_1min=$rss
  if ((t % 30 == 0 && t < seconds)); then
    version=$((version + 1))
    cp -r "$out/template" "$models/.tmp-$version"
    mv "$models/.tmp-$version" "$models/$version"
    [ "$version" -gt 2 ] && rm -rf "$models/$((version - 2))"
  fi
  if ((t % 60 == 0 && t < seconds)); then
    write_config $(((t / 60) % 2 + 1))
  fi
done
wait "$rest_pid" || true
wait "$grpc_pid" || true
rss_end=$(rss_kib)

cat "$out/rest.err" "$out/grpc.err" >&2
echo
echo "| protocol | rate asked | requests/s | p50 µs | p90 µs | p99 µs | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|"
awk -F'|' -v r="$rate_rest" '{printf "| REST | %s |%s|%s|%s|%s|%s|\n", r, $5, $6, $7, $8, $9}' "$out/rest.txt"
awk -F'|' -v r="$rate_grpc" '{printf "| gRPC | %s |%s|%s|%s|%s|%s|\n", r, $5, $6, $7, $8, $9}' "$out/grpc.txt"
failed=$(cat "$out/rest.txt" "$out/grpc.txt" | awk -F'|' '{gsub(/ /, "", $9); s += $9} END {print s + 0}')
rows=$(cat "$out/rest.txt" "$out/grpc.txt" | wc -l)
versions=$(grep -c "event=version_available" "$out/server.log" || true)
reloads=$(grep -c "event=config_file_reloaded" "$out/server.log" || true)
growth=$(awk -v a="$rss_at_1min" -v b="$rss_end" 'BEGIN {printf "%.1f", (b - a) * 100 / a}')
echo
echo "versions loaded: $versions; config reloads: $reloads; failed requests: $failed; failed scrapes: $scrape_failures"
echo "resident memory: $rss_at_1min KiB after 1 min, $rss_end KiB at the end ($growth%)"
echo "series in the exposition: $(awk -F'\t' 'NR == 7 {print $3}' "$out/rss.tsv") after 1 min, $series at the end"
echo "logs: $out"
if [ "$rows" -ne 2 ] || [ "$failed" -ne 0 ] || [ "$scrape_failures" -ne 0 ] ||
  awk -v g="$growth" -v limit="${SOAK_MAX_GROWTH_PERCENT:-3}" 'BEGIN {exit !(g > limit)}'; then
  echo "soak FAILED" >&2
  exit 1
fi
echo "soak passed"
