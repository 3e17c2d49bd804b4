#!/usr/bin/env bash
# Farm scaling: one search, fresh DB, with 1, 2, 4, 8 ios-worker processes of
# sim:v100 that sleep DELAY ms per measurement (standing in for GPU time).
# Prints a markdown table: wall time, measurement phase, speedup, efficiency.
#   bash bench/farm_scaling.sh [MODEL] [DELAY_MS] [WORKER_COUNTS...]
# BIN (default build) names the build directory; results go to docs/benchmarks.md by hand.
set -euo pipefail

MODEL="${1:-nasnet}"
DELAY="${2:-10}"
shift $(( $# > 2 ? 2 : $# ))
COUNTS=("${@:-1 2 4 8}")
read -r -a COUNTS <<<"${COUNTS[*]}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

measure_s() {  # measure phase of the last search in DB $1
  "$BIN/db/ios-db" --db "$1" searches --format json |
    /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)[-1]; print(s["measure_s"], s["stages_measured"])'
}

echo "model $MODEL, r=3 s=8, strategy both, sim:v100 workers sleeping $DELAY ms per stage"
echo
echo "| workers | wall | measure phase | stages | speedup (measure) | efficiency (measure) | efficiency (wall) |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
base_measure="" base_wall=""
for n in "${COUNTS[@]}"; do
  db="$WORK/w$n.db"
  log="$WORK/coordinator-$n.log"
  start=$(date +%s.%N)
  "$BIN/coordinator/ios-coordinator" --model "$MODEL" --bind 'tcp://127.0.0.1:*' --local-workers 0 --device sim:v100 \
    --min-workers "$n" --db "$db" --quiet --no-baselines >"$WORK/out-$n.txt" 2>"$log" &
  coordinator=$!
  endpoint=""
  for _ in $(seq 100); do
    endpoint=$(grep -o 'listening for workers on tcp://[0-9.:]*' "$log" | awk '{print $NF}' || true)
    [[ -n "$endpoint" ]] && break
    sleep 0.1
  done
  [[ -n "$endpoint" ]] || { echo "coordinator did not start:"; cat "$log"; exit 1; }
  workers=()
  for i in $(seq "$n"); do
    "$BIN/worker/ios-worker" --connect "$endpoint" --backend sim:v100 --sim-delay-ms "$DELAY" \
      --id "w$i" --log-level warn >"$WORK/worker-$n-$i.log" 2>&1 &
    workers+=($!)
  done
  wait "$coordinator"
  end=$(date +%s.%N)
  kill "${workers[@]}" 2>/dev/null || true
  wait "${workers[@]}" 2>/dev/null || true
  read -r measure stages < <(measure_s "$db")
  wall=$(echo "$end - $start" | bc -l)
  if [[ -z "$base_measure" ]]; then
    base_measure=$(echo "$measure * ${COUNTS[0]}" | bc -l)
    base_wall=$(echo "$wall * ${COUNTS[0]}" | bc -l)
  fi
  printf '| %d | %.1f s | %.1f s | %d | %.2fx | %.0f%% | %.0f%% |\n' "$n" "$wall" "$measure" "$stages" \
    "$(echo "$base_measure / $measure" | bc -l)" "$(echo "100 * $base_measure / ($measure * $n)" | bc -l)" \
    "$(echo "100 * $base_wall / ($wall * $n)" | bc -l)"
done
