#!/usr/bin/env bash
# The specialization matrix (issue 25; the IOS paper's Table 3) of Inception
# V3 on the simulator: batch sizes 1, 32 and 128 on sim:v100, and sim:k80
# against sim:v100 at batch 1, each run twice on one DB. The second run must
# measure nothing (stages_measured = runs_measured = 0); its wall time is
# what reusing the DB costs. Prints both matrices as text and a markdown
# table of the two runs.
#   bash bench/specialize.sh
# Environment: BIN (build directory, default build), OUT (directory for the
# DB, matrices and logs; default a new /tmp/specialize.XXXXXX, kept),
# MODEL (default inception_v3). Results go to docs/benchmarks.md by hand.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
COORDINATOR="${COORDINATOR:-$BIN/coordinator/ios-coordinator}"
MODEL="${MODEL:-inception_v3}"
OUT="${OUT:-$(mktemp -d /tmp/specialize.XXXXXX)}"
mkdir -p "$OUT"
DB="$OUT/specialize.db"

# name, then the arguments that choose the settings
CASES=(
  "batches|--batch 1,32,128 --device sim:v100"
  "devices|--batch 1 --device sim:k80 --device sim:v100"
)

rows=()
for entry in "${CASES[@]}"; do
  name="${entry%%|*}"
  settings="${entry#*|}"
  for run in 1 2; do
    start=$(date +%s.%N)
    # shellcheck disable=SC2086  # $settings is a list of arguments
    "$COORDINATOR" --model "$MODEL" --specialize $settings --db "$DB" --format json -q \
      >"$OUT/$name-$run.json" 2>"$OUT/$name-$run.log"
    end=$(date +%s.%N)
    wall=$(echo "$end - $start" | bc)
    counts=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["stages_measured"], d["runs_measured"])' "$OUT/$name-$run.json")
    read -r stages runs <<<"$counts"
    rows+=("| $name | $run | $stages | $runs | $(printf '%.1f' "$wall") |")
    if [[ $run == 2 && ($stages != 0 || $runs != 0) ]]; then
      echo "specialize.sh: the second $name run measured $stages stages and $runs runs" >&2
      exit 1
    fi
  done
  # shellcheck disable=SC2086
  "$COORDINATOR" --model "$MODEL" --specialize $settings --db "$DB" -q >"$OUT/$name.txt" \
    2>>"$OUT/$name-2.log"
  cat "$OUT/$name.txt"
  echo
done

echo "| matrix | run | stages measured | end-to-end runs measured | wall s |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "files: $OUT ($(nproc) cores, $(uptime | sed 's/.*load average/load average/'))"
