#!/usr/bin/env bash
# The real-model table: every model of the real-model suite (tests/real_models/, with --all the
# large ones the suite leaves out: ResNet-50, ViT-B/16, ConvNeXt-T, Swin-T, ...) imported and run
# by bench_onnx on the suite's own input at batch 1 (or as the case gives it), one thread:
# whether it loads, the largest difference from the reference (PyTorch's, or onnxruntime's for
# the npm models) over the reference's largest magnitude, the load time (import and compile),
# and the median latency. Prints a markdown table; --write puts it in bench/onnx/README.md between
# its markers.
#
#   bench/onnx/run_real_models.sh [BUILD_DIR] [--all] [--iterations N] [--write]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
all=()
iterations=20
write=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --all) all=(--all); shift ;;
    --iterations) iterations=$2; shift 2 ;;
    --write) write=1; shift ;;
    *) echo "run_real_models: unknown argument $1" >&2; exit 2 ;;
  esac
done
cmake --build "$build" --target bench_onnx -j2 >&2
cases=$("$root/tests/real_models/prepare" "${all[@]}")
table="| model | source | opset | loads | max error (of the largest magnitude) | load ms | ms per request |
|---|---|---:|---|---:|---:|---:|"
for dir in "$cases"/*/; do
  name=$(basename "$dir")
  info=$dir/info.json
  source=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('source', ''))" "$info")
  opset=$(/usr/bin/python3 -c "
import onnx, sys
m = onnx.load(sys.argv[1], load_external_data=False)
print(max(o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')))" "$dir/model.onnx" 2>/dev/null || echo "?")
  if result=$("$build/bench/bench_onnx" --case "$dir" --threads 1 --iterations "$iterations" 2>&1); then
    row=$(python3 -c "
import json, sys
r = json.loads(sys.argv[1])
print(f\"yes | {r['max_rel']:.2g} | {r['load_ms']:.0f} | {r['median_us'] / 1000:.2f}\")" "$result")
  else
    row="no: ${result//|//} | | |"
  fi
  table+=$'\n'"| $name | $source | $opset | $row |"
done
echo "$table"
if [[ $write == 1 ]]; then
  python3 - "$root/bench/onnx/README.md" "$table" <<'PY'
import sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
begin, end = "<!-- real-models:begin -->", "<!-- real-models:end -->"
block = begin + "\n" + table + "\n" + end
if begin in text:
    text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
else:
    text += "\n" + block + "\n"
open(path, "w").write(text)
PY
  echo "wrote bench/onnx/README.md" >&2
fi
