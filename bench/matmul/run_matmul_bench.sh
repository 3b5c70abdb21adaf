#!/usr/bin/env bash
# Lockstep's matmul core next to oneDNN, OpenBLAS and Eigen, all measured in this one run:
# installs the bench-only peers when missing, builds bench_matmul and bench_matmul_compare, and
# prints the comparison (one table per dtype and thread count, then the targets' pass/fail).
#
#   bench/matmul/run_matmul_bench.sh [BUILD_DIR] [bench_matmul_compare flags...]
#
# BUILD_DIR defaults to build; it is configured (Release, when new) and only the two matmul
# bench targets are built. Flags after it go to bench_matmul_compare, for a quick run:
#   bench/matmul/run_matmul_bench.sh build --threads=1 --dtypes=bf16 --shapes=mlp --min_time=0.1 --rounds=1
# See bench/matmul/README.md for what is measured and how.
#
# The peers (libdnnl-dev, libopenblas-dev) are bench-only dependencies: installed here, never by
# scripts/install-deps, and linked into bench_matmul_compare alone.
#
# Exit status: bench_matmul_compare's: 0 when every product passed its correctness check
# (targets missed are reported, not errors), 1 otherwise; 2 on bad flags.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build}
[[ $# -gt 0 ]] && shift

die() {
  echo "run_matmul_bench: $*" >&2
  exit 1
}

packages=(libdnnl-dev libopenblas-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "run_matmul_bench: installing the bench-only peers: ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
else
  # Picks up the peers when they were installed after the first configure.
  cmake "$build" >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target bench_matmul bench_matmul_compare >/dev/null ||
  die "the build failed: cmake --build $build --target bench_matmul_compare shows why"
[[ -x $build/bench/bench_matmul_compare ]] || die "no bench/bench_matmul_compare under $build"

# A core type forced in the environment silently halves OpenBLAS on some machines: run with
# the one it detects (the report prints it).
if [[ -n ${OPENBLAS_CORETYPE:-} ]]; then
  echo "run_matmul_bench: ignoring OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (OpenBLAS detects its core)" >&2
fi
exec env -u OPENBLAS_CORETYPE "$build/bench/bench_matmul_compare" "$@"
