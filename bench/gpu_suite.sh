#!/usr/bin/env bash
# The cuda backend's benchmark table (docs/gpu.md, "First run on a GPU"): for
# each model and batch size, a search on the GPU through one ios-worker
# (lazy measurement, fresh DB), then ios-run of the sequential, greedy and
# IOS schedules on the GPU with --check and --cuda-graph. Prints markdown
# rows for docs/benchmarks.md; needs a GPU and says so in one line without.
#   bash bench/gpu_suite.sh [MODELS] [BATCHES] [GPU]
#   defaults: "squeezenet inception_v3" "1 8" 0
# BIN (default build) names the build directory.
set -euo pipefail

read -r -a MODELS <<<"${1:-squeezenet inception_v3}"
read -r -a BATCHES <<<"${2:-1 8}"
GPU="${3:-0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
WORK="$(mktemp -d)"
worker=""
cleanup() {
  if [[ -n "$worker" ]]; then kill "$worker" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! "$BIN/run/ios-run" --model squeezenet --device "cuda:$GPU" --runs 1 --warmup 0 --no-predict \
  >/dev/null 2>"$WORK/probe"; then
  echo "gpu_suite: no usable GPU: $(tail -n 1 "$WORK/probe")" >&2
  exit 1
fi

port=$((20000 + RANDOM % 20000))
"$BIN/worker/ios-worker" --backend "cuda:$GPU" --connect "tcp://127.0.0.1:$port" --id "gpu$GPU" \
  >"$WORK/worker.log" 2>&1 &
worker=$!

field() {  # field FILE PYTHON-EXPRESSION-ON-d
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

echo "cuda:$GPU ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i "$GPU" 2>/dev/null || echo unknown)); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| model | batch | schedule | search | stages measured | predicted | streams (median) | CUDA graph (median) | check |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---|"
for model in "${MODELS[@]}"; do
  for batch in "${BATCHES[@]}"; do
    db="$WORK/$model.db"
    schedule="$WORK/$model-$batch.json"
    start=$(date +%s.%N)
    "$BIN/coordinator/ios-coordinator" --model "$model" --batch "$batch" --device cuda \
      --bind "tcp://127.0.0.1:$port" --min-workers 1 --db "$db" --out "$schedule" -q >/dev/null
    search_s=$(/usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f} s')" \
      "$start" "$(date +%s.%N)")
    measured=$("$BIN/db/ios-db" --db "$db" searches --format json |
      /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[-1]["stages_measured"])')
    for which in sequential greedy ios; do
      args=(--device "cuda:$GPU" --batch "$batch" --db "$db" --format json --runs 50 --check --cuda-graph)
      if [[ "$which" == ios ]]; then args+=(--schedule "$schedule"); else args+=(--model "$model" --schedule "$which"); fi
      out="$WORK/run.json"
      "$BIN/run/ios-run" "${args[@]}" >"$out" || true
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$model" "$batch" "$which" \
        "$search_s" "$measured" \
        "$(field "$out" 'f"{d[\"predicted_ms\"]:.3f} ms" if d["predicted_ms"] is not None else "-"')" \
        "$(field "$out" 'f"{d[\"measured_ms\"][\"median\"]:.3f} ms"')" \
        "$(field "$out" 'f"{d[\"replay_ms\"][\"median\"]:.3f} ms"')" \
        "$(field "$out" '"passed" if d["check"]["passed"] else "FAILED"')"
    done
  done
done
