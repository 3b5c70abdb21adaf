#!/usr/bin/env bash
# Lockstep next to onnxruntime (onnxruntime-node, CPU) on the models of issue 56: every Silero
# VAD build (tests/real_models/silero_vad/prepare: one 512-sample chunk, its state and sample
# rate, as a stream runs it) and torchvision's detectors (tests/real_models/detection/prepare
# --all: one [3, 320, 320] image; the test suite runs the two MobileNet ones). On 1 thread,
# alternately for R rounds (default 3), each one's best median; beside it, how long Lockstep's
# first run took (for a model whose graph is made per input shape, runtime/onnx/onnx_per_input.h,
# the time to a first answer for a new shape, the graph made and compiled) and, for a detector,
# how many of onnxruntime's detections Lockstep's answer matches (compare.py: label, box and
# score; masks and keypoints over the matched rows). Prints a markdown table.
#
#   bench/onnx/run_stateful_bench.sh [BUILD_DIR] [--rounds R] [--iterations N]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
rounds=3
iterations=500
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    *) echo "usage: $0 [BUILD_DIR] [--rounds R] [--iterations N]" >&2; exit 2 ;;
  esac
done
cd "$root"
cmake --build "$build" -j2 --target bench_onnx model-cli >/dev/null
modules=$(tests/real_models/onnxruntime_node)
silero=$(tests/real_models/silero_vad/prepare)
detection=$(tests/real_models/detection/prepare --all)
detectors=(ssdlite320 fasterrcnn_mobilenet_v3_320_fpn fasterrcnn_resnet50_fpn maskrcnn_resnet50_fpn
           keypointrcnn_resnet50_fpn retinanet_resnet50_fpn ssd300_vgg16)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Input specs (bench_onnx --inputs, ort_bench.js --inputs): raw little-endian files.
/usr/bin/python3 - "$work" "$silero" "$detection" "${detectors[@]}" <<'PY'
import json, os, sys
import numpy as np
work, silero, detection = sys.argv[1:4]
audio = np.fromfile(os.path.join(silero, "audio.f32"), dtype="<f4")
def spec(name, entries):
    items = []
    for input_name, array in entries:
        path = os.path.join(work, f"{name}.{input_name}.bin")
        array.tofile(path)
        items.append({"name": input_name, "dtype": "int64" if array.dtype == np.int64 else "float32",
                      "shape": list(array.shape), "file": path})
    with open(os.path.join(work, f"{name}.json"), "w") as f:
        json.dump(items, f)
sr = np.array(16000, dtype=np.int64)
chunk = audio[16000:16000 + 576].astype("<f4").reshape(1, 576)
state = np.zeros((2, 1, 128), dtype="<f4")
spec("v5", [("input", chunk), ("state", state), ("sr", sr)])
spec("v5_half", [("input", chunk), ("state", state)])
spec("v4", [("input", chunk[:, 64:].copy()), ("sr", sr), ("h", np.zeros((2, 1, 64), "<f4")), ("c", np.zeros((2, 1, 64), "<f4"))])
for name in sys.argv[4:]:
    image = np.fromfile(os.path.join(detection, name, "image.f32"), dtype="<f4").reshape(3, 320, 320)
    spec(name, [("image", image)])
    with open(os.path.join(work, f"{name}.image.json"), "w") as f:
        json.dump(image.tolist(), f)
PY

echo "| model | graph | Lockstep µs | onnxruntime µs | ours / ort | first run ms (ours) | onnxruntime's answer |"
echo "|---|---|---:|---:|---:|---:|---|"
rows=("silero v5 opset 18:$silero/model/model.onnx:v5" "silero v5 16k (opset 15):$silero/v5_16k_op15/model.onnx:v5"
      "silero v5 8k+16k (opset 16):$silero/v5_8k_16k/model.onnx:v5" "silero v5 float16:$silero/v5_half/model.onnx:v5_half"
      "silero v4 (opset 16):$silero/v4/model.onnx:v4")
for name in "${detectors[@]}"; do rows+=("$name:$detection/$name/model.onnx:$name"); done
for row in "${rows[@]}"; do
  IFS=: read -r label model inputs <<<"$row"
  n=$iterations
  agrees="every chunk (tests)"
  if [[ $label != silero* ]]; then
    n=5
    "$build"/runtime/cli/model-cli run --dir "$(dirname "$model")" --input "image=@$work/$inputs.image.json" >"$work/ours.json"
    agrees=$(/usr/bin/python3 tests/real_models/detection/compare.py "$work/ours.json" "$(dirname "$model")/reference.json" |
      /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["summary"])')
  fi
  ours=1e99 theirs=1e99 first=0
  for ((r = 0; r < rounds; r++)); do
    line=$("$build/bench/bench_onnx" --model "$model" --inputs "$work/$inputs.json" --threads 1 --iterations "$n")
    median=$(echo "$line" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_us"])')
    [[ $r == 0 ]] && first=$(echo "$line" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["first_run_ms"])')
    ours=$(/usr/bin/python3 -c "print(min($ours, $median))")
    line=$(node bench/onnx/ort_bench.js --modules "$modules" --model "$model" --inputs "$work/$inputs.json" --threads 1 --iterations "$n" 2>/dev/null)
    median=$(echo "$line" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_us"])')
    theirs=$(/usr/bin/python3 -c "print(min($theirs, $median))")
  done
  graph=$("$build"/runtime/cli/model-cli verify --dir "$(dirname "$model")" | grep -q "per input shape" && echo "per input shape" || echo "one, at load")
  /usr/bin/python3 -c "print(f'| $label | $graph | {$ours:.1f} | {$theirs:.1f} | {$ours / $theirs:.2f} | {$first:.1f} | $agrees |')"
done
