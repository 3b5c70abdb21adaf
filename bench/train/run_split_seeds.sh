#!/usr/bin/env bash
# Test accuracy of the example configs over ten stratified splits: each config is trained once
# per split seed (data.split.seed = 0..9), everything else as the config says, and the test
# accuracy model-train prints is collected. Prints one Markdown table: mean, min and max per
# config, and every split's figure.
#
#   bench/train/run_split_seeds.sh [BUILD_DIR] [CONFIG ...]
#     (default: build, config/train/digits.json and config/train/digits_cnn.json)
#
# Environment: SPLIT_SEEDS (default "0 1 2 3 4 5 6 7 8 9"), TRAIN_SEED (the config's "seed"
# for initialisers and shuffling; default: the config's own).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(config/train/digits.json config/train/digits_cnn.json)
seeds=${SPLIT_SEEDS:-0 1 2 3 4 5 6 7 8 9}
model_train=$build/training/model-train
[ -x "$model_train" ] || { echo "run_split_seeds: no $model_train (build first)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "| config | mean | min | max | per split seed ($seeds) |"
echo "|---|---:|---:|---:|---|"
for config in "${configs[@]}"; do
  figures=()
  for seed in $seeds; do
    # The config with this split seed; its relative paths still resolve from the repository root.
    python3 - "$config" "$seed" "${TRAIN_SEED:-}" >"$tmp/config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["data"].setdefault("split", {})["seed"] = int(sys.argv[2])
if sys.argv[3]:
    config["seed"] = int(sys.argv[3])
json.dump(config, sys.stdout)
PY
    rm -rf "$tmp/models"
    accuracy=$("$model_train" --config "$tmp/config.json" --export_dir "$tmp/models" 2>/dev/null |
      sed -n 's/^test_accuracy=\([0-9.]*\).*/\1/p')
    [ -n "$accuracy" ] || { echo "run_split_seeds: no test accuracy from $config, split seed $seed" >&2; exit 1; }
    figures+=("$accuracy")
  done
  printf '%s\n' "${figures[@]}" | awk -v name="$config" '
    { v[NR] = $1 * 100; sum += v[NR]; if (NR == 1 || v[NR] < lo) lo = v[NR]; if (NR == 1 || v[NR] > hi) hi = v[NR] }
    END {
      list = ""
      for (i = 1; i <= NR; i++) list = list (i > 1 ? ", " : "") sprintf("%.1f", v[i])
      printf "| `%s` | %.2f %% | %.2f %% | %.2f %% | %s |\n", name, sum / NR, lo, hi, list
    }'
done
