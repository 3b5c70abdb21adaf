#!/usr/bin/env bash
# Time to ready of model-cli's 128 MiB large_matmul served from an S3 repository (s3rver from
# npm on 127.0.0.1, the test suite's S3 server) beside the same version in a local directory:
# from model-server's start to the version AVAILABLE, with an empty download cache (listing,
# download, checks, load) and with the version already cached (a restart). Also the upload
# (model-cli publish) and the download alone (the s3_version_fetched event's seconds). Best of
# BENCH_ROUNDS starts each.
#
#   bench/serving/run_s3_load_bench.sh [BUILD_DIR]        (default: build)
#
# Environment: BENCH_ROUNDS (default 3).
# shellcheck disable=SC2154  # $tmp and $pid_large are set by lib.sh
set -euo pipefail

build=${1:-build}
die() {
  echo "run_s3_load_bench: $*" >&2
  exit 1
}
model_cli=$build/runtime/cli/model-cli
model_server=$build/server/model-server
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/serving/lib.sh
source "$here/lib.sh"
require_binaries "$model_cli" "$model_server"
command -v node >/dev/null || die "node is needed for s3rver (scripts/install-deps installs it)"
start_scratch

s3rver=$("$here/../../tests/s3/s3rver" | tail -n 1)
s3_port=$((20000 + RANDOM % 40000))
mkdir -p "$tmp/s3"
node --openssl-legacy-provider "$s3rver" -d "$tmp/s3" -a 127.0.0.1 -p "$s3_port" --silent \
  --configure-bucket models >"$tmp/s3rver.log" 2>&1 &
pids+=("$!")
for ((i = 0; i < 100; i++)); do port_in_use "$s3_port" && break; sleep 0.1; done
port_in_use "$s3_port" || die "s3rver did not start: $(cat "$tmp/s3rver.log")"
export S3_ENDPOINT=127.0.0.1:$s3_port S3_USE_HTTPS=0 AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER

"$model_cli" make-example large_matmul --out "$tmp/local/1" >/dev/null
bytes=$(du -sb "$tmp/local/1" | cut -f1)
start=$(date +%s.%N)
"$model_cli" publish --dir "$tmp/local/1" --to s3://models/large >/dev/null
awk -v s="$start" -v e="$(date +%s.%N)" -v b="$bytes" \
  'BEGIN { printf "upload (model-cli publish, verify + PUTs): %.3f s, %.0f MB/s\n", e - s, b / (e - s) / 1e6 }'

# Seconds from model-server's start to version 1 AVAILABLE, with the flags that follow.
time_to_ready() {
  local t0 t
  t0=$(date +%s.%N)
  start_server large --model_name=large "$@"
  for ((t = 0; t < 1200; t++)); do
    grep -q "event=version_available" "$tmp/large.log" && break
    sleep 0.05
  done
  grep -q "event=version_available" "$tmp/large.log" || die "no version loaded: $(tail -n 5 "$tmp/large.log")"
  awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }'
  kill "$pid_large"
  wait "$pid_large" 2>/dev/null || true
}

best() { sort -n | head -n 1; }
rounds=${BENCH_ROUNDS:-3}
local_s=$(for ((r = 0; r < rounds; r++)); do time_to_ready --model_base_path="$tmp/local"; echo; done | best)
cold_s=$(for ((r = 0; r < rounds; r++)); do
  rm -rf "$tmp/cache"
  time_to_ready --model_base_path=s3://models/large --model_cache_dir="$tmp/cache"
  echo
done | best)
fetch_s=$(grep -o "event=s3_version_fetched.*seconds=[0-9.]*" "$tmp/large.log" | grep -o "seconds=[0-9.]*" | cut -d= -f2)
cached_s=$(for ((r = 0; r < rounds; r++)); do
  time_to_ready --model_base_path=s3://models/large --model_cache_dir="$tmp/cache"
  echo
done | best)
printf "time to ready, %s bytes (best of %s starts):\n" "$bytes" "$rounds"
printf "  local directory:        %s s\n" "$local_s"
printf "  S3, empty cache:        %s s (of which the download: %s s)\n" "$cold_s" "$fetch_s"
printf "  S3, version cached:     %s s\n" "$cached_s"
awk -v c="$cold_s" -v l="$local_s" -v w="$cached_s" \
  'BEGIN { printf "  ratio to local: %.2fx (empty cache), %.2fx (cached)\n", c / l, w / l }'
