#!/usr/bin/env bash
# Import time of weight-bearing ONNX exports (issue 26's "import of any of
# them under 3 s"): each model is exported once with its seeded weights
# (scripts/export-torchvision.py, kept in OUT between runs) and imported
# RUNS times by `ios-coordinator --model X.onnx --device sim:v100
# --no-verify` (the search on the simulator is not timed: the figure is the
# coordinator's own "imported in" line: mapping, parsing, checking, shape
# inference, weights, mapping onto the IR and the blocks). Prints the file
# size, each run's import time, the median, and the process's peak RSS and
# minor page faults (/usr/bin/time) of the median run.
#   bash bench/onnx_import.sh [MODEL...]   (default: the largest exports)
# Environment: BIN (build directory, default build), OUT (exports; default
# /tmp/ios-import-bench, kept), RUNS (default 5). Needs Debian's
# python3-torch, python3-torchvision and python3-onnx for the exports.
# Results go to docs/benchmarks.md by hand.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
COORDINATOR="$BIN/coordinator/ios-coordinator"
OUT="${OUT:-/tmp/ios-import-bench}"
RUNS="${RUNS:-5}"
PYTHON=/usr/bin/python3
[[ -x "$COORDINATOR" ]] || { echo "error: $COORDINATOR not built" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }

if (($# > 0)); then
  models=("$@")
else
  models=(vit_h_14 regnet_y_128gf vit_l_16 convnext_large regnet_y_32gf vgg19_bn efficientnet_v2_l vit_b_16)
fi
mkdir -p "$OUT"

echo "| model | file | import, median of $RUNS (each) | peak RSS | minor faults |"
echo "|---|---:|---:|---:|---:|"
for model in "${models[@]}"; do
  # A directory each: a model over 2 GiB comes with external data files
  # named after its tensors.
  dir="$OUT/$model"
  onnx="$dir/$model.onnx"
  if [[ ! -s "$onnx" ]]; then
    mkdir -p "$dir"
    "$PYTHON" "$ROOT/scripts/export-torchvision.py" "$model" --out "$dir" >/dev/null 2>"$dir/export.log" ||
      { echo "| $model | export failed: $(tail -n 1 "$dir/export.log") | | | |"; continue; }
    rm -f "$dir/$model.in.bin" "$dir/$model.out.bin"
  fi
  times=() rows=()
  for ((run = 0; run < RUNS; run++)); do
    log=$(/usr/bin/time -f 'time: %M KB %R faults' "$COORDINATOR" --model "$onnx" \
      --device sim:v100 --no-verify --db "$OUT/import.db" 2>&1 >/dev/null)
    seconds=$(grep -o 'imported in [0-9.]* s' <<<"$log" | awk '{print $3}')
    [[ -n "$seconds" ]] || { echo "error: no import line for $model:" >&2; tail -n 3 <<<"$log" >&2; exit 1; }
    times+=("$seconds")
    rows+=("$seconds $(grep '^time:' <<<"$log" | awk '{print $2, $4}')")
  done
  median=$(printf '%s\n' "${rows[@]}" | sort -n | sed -n "$(((RUNS + 1) / 2))p")
  read -r seconds rss_kb faults <<<"$median"
  size_mb=$(($(du -L -b -c "$dir"/* | tail -n 1 | cut -f 1) / 1000000))  # with external data
  echo "| $model | $size_mb MB | **$seconds s** (${times[*]}) | $((rss_kb / 1024)) MiB | $faults |"
done
