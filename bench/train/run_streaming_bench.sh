#!/usr/bin/env bash
# The streaming input, measured in one run on this machine:
#  1. the reader's records/s and MB/s on Fashion-MNIST's TFRecord shards (plain and gzip), stage
#     by stage (bench_input), beside python3-protobuf reading the same shards;
#  2. training Fashion-MNIST's MLP in memory and streaming, alternating, R rounds: samples/s
#     and the peak resident set;
#  3. a synthetic TFRecord set of G gigabytes (generated here, in WORK), trained one epoch in
#     each mode: samples/s and the peak resident set.
#
#   bench/train/run_streaming_bench.sh [BUILD_DIR] [--rounds R] [--gigabytes G] [--work DIR]
#
# Installs what it needs from Debian when missing (dataset-fashion-mnist, python3-protobuf,
# python3-crc32c: bench-only). WORK (default /tmp/lockstep_streaming_bench) keeps the converted
# shards between runs; the synthetic set is deleted at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
rounds=3
gigabytes=4
work=/tmp/lockstep_streaming_bench
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --gigabytes) gigabytes=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "run_streaming_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done

source "$root/bench/train/bench_packages.sh"
install_missing_packages dataset-fashion-mnist python3-protobuf python3-crc32c time
cmake --build "$build" -j"$(nproc)" --target model-train bench_input bench_synthetic_tfrecords >/dev/null

fm=$work/fashion_mnist
if [[ ! -f $fm/plain/test-00000-of-00001.tfrecord ]]; then
  /usr/bin/python3 "$root/examples/fashion_mnist/convert.py" --out "$fm/plain" >&2
  /usr/bin/python3 "$root/examples/fashion_mnist/convert.py" --out "$fm/gzip" --gzip >&2
fi

echo "## Reading Fashion-MNIST's 8 training shards (60,000 records)"
echo
echo "| reader | records/s | MB/s of records |"
echo "|---|---:|---:|"
row() { /usr/bin/python3 -c 'import json,sys
for line in sys.stdin:
    r = json.loads(line); print("| %s%s | %d | %.1f |" % (sys.argv[1], r["stage"], r["records_per_s"], r["mb_per_s"]))' "$1"; }
"$build/bench/bench_input" --features pixels "$fm"/plain/train-*.tfrecord | row ""
"$build/bench/bench_input" --features pixels "$fm"/gzip/train-*.tfrecord.gz | row "gzip: "
/usr/bin/python3 "$root/bench/train/input_python_peer.py" --features pixels "$fm"/plain/train-*.tfrecord | row ""
echo

# A config for model-train: the MLP of examples/fashion_mnist/mlp.json on the files given.
config() {  # out train_pattern test_pattern mode epochs
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
out, train, test, mode, epochs = sys.argv[1:6]
c = json.load(open(__import__("os").environ["ROOT"] + "/examples/fashion_mnist/mlp.json"))
c["data"].update({"train": train, "test": test, "mode": mode})
c["epochs"] = int(epochs)
c.pop("export", None)
json.dump(c, open(out, "w"))
PY
}
export ROOT=$root
# model-train's median epoch samples/s and peak RSS (MB), as "samples_per_s rss_mb".
train() {  # config
  local log
  log=$(mktemp)
  /usr/bin/time -f "rss_kb=%M" "$build/training/model-train" --config "$1" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  /usr/bin/python3 - "$log" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
rates = [float(x) for x in re.findall(r"event=epoch .*samples_per_s=([0-9.]+)", text)]
rss = int(re.search(r"rss_kb=([0-9]+)", text).group(1))
print("%.0f %.0f" % (statistics.median(rates), rss / 1024))
PY
  rm -f "$log"
}

echo "## Fashion-MNIST MLP: in memory and streaming, $rounds rounds of 3 epochs, alternating"
echo
config "$work/memory.json" "$fm/plain/train-*.tfrecord" "$fm/plain/test-*.tfrecord" memory 3
config "$work/streaming.json" "$fm/plain/train-*.tfrecord" "$fm/plain/test-*.tfrecord" streaming 3
config "$work/streaming_gzip.json" "$fm/gzip/train-*.tfrecord.gz" "$fm/gzip/test-*.tfrecord.gz" streaming 3
echo "| round | memory samples/s | streaming samples/s | streaming gzip samples/s | memory RSS MB | streaming RSS MB | gzip RSS MB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for r in $(seq 1 "$rounds"); do
  read -r m_rate m_rss <<<"$(train "$work/memory.json")"
  read -r s_rate s_rss <<<"$(train "$work/streaming.json")"
  read -r g_rate g_rss <<<"$(train "$work/streaming_gzip.json")"
  echo "| $r | $m_rate | $s_rate | $g_rate | $m_rss | $s_rss | $g_rss |"
done
echo

echo "## A synthetic set of $gigabytes GB, one epoch"
echo
syn=$work/synthetic
rm -rf "$syn"
trap 'rm -rf "$syn"' EXIT
"$build/bench/bench_synthetic_tfrecords" "$syn" "$gigabytes" 16 >&2
config "$work/syn_streaming.json" "$syn/train-*.tfrecord" "$fm/plain/test-*.tfrecord" streaming 1
config "$work/syn_memory.json" "$syn/train-*.tfrecord" "$fm/plain/test-*.tfrecord" memory 1
echo "| mode | samples/s | peak RSS MB |"
echo "|---|---:|---:|"
read -r s_rate s_rss <<<"$(train "$work/syn_streaming.json")"
echo "| streaming | $s_rate | $s_rss |"
read -r m_rate m_rss <<<"$(train "$work/syn_memory.json")"
echo "| memory | $m_rate | $m_rss |"
