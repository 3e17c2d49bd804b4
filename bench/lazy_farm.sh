#!/usr/bin/env bash
# Lazy against exhaustive measurement through the farm (issue 9): for each
# model and worker count, a search with --measure all and one with
# --measure lazy, each on a fresh DB, with embedded sim:v100 workers that
# sleep DELAY ms per stage (standing in for a GPU's measuring time). Prints
# a markdown table: stages measured, measure phase, wall time, how busy the
# workers were (stages x DELAY / (workers x measure phase)), and whether
# both found the same schedule.
#   bash bench/lazy_farm.sh [MODELS] [WORKER_COUNTS] [DELAY_MS]
#   defaults: "inception_v3 nasnet" "1 8" 10
# A model is a zoo name or a model file (IOS JSON or ONNX), e.g.
#   bash bench/lazy_farm.sh ../shared/fixtures/ios-reference/models/nasnet.json "1 8" "0"
# (DELAY_MS 0: no sleep; the busy column then says nothing.)
# BIN (default build) names the build directory; results go to docs/benchmarks.md by hand.
set -euo pipefail

read -r -a MODELS <<<"${1:-inception_v3 nasnet}"
read -r -a COUNTS <<<"${2:-1 8}"
DELAY="${3:-10}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

last_search() {  # measure_s and stages_measured of the last search in DB $1
  "$BIN/db/ios-db" --db "$1" searches --format json |
    /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)[-1]; print(s["measure_s"], s["stages_measured"])'
}

stages_of() {  # the schedule file's stages, one line each, for comparison
  /usr/bin/python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
for b in d["blocks"]:
    for s in b["stages"]:
        print(s["strategy"], s["groups"])' "$1"
}

echo "sim:v100 workers sleeping $DELAY ms per stage; r=3 s=8, strategy both, batch 1;" \
  "$(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| model | workers | measure | stages measured | measure phase | wall | workers busy | same schedule |"
echo "|---|---:|---|---:|---:|---:|---:|---|"
for model in "${MODELS[@]}"; do
  name="$(basename "$model")"
  name="${name%.json}"
  for n in "${COUNTS[@]}"; do
    for mode in all lazy; do
      db="$WORK/$name-$n-$mode.db"
      start=$(date +%s.%N)
      "$BIN/coordinator/ios-coordinator" --model "$model" --device sim:v100 --measure "$mode" \
        --local-workers "$n" --sim-delay-ms "$DELAY" --db "$db" --out "$WORK/$mode.json" -q \
        >/dev/null
      end=$(date +%s.%N)
      read -r measure stages < <(last_search "$db")
      same=""
      if [[ "$mode" == lazy ]]; then
        if cmp -s <(stages_of "$WORK/all.json") <(stages_of "$WORK/lazy.json"); then
          same=yes
        else
          same=NO
        fi
      fi
      awk -v m="$name" -v n="$n" -v mode="$mode" -v st="$stages" -v ms="$measure" \
        -v wall="$(awk "BEGIN { print $end - $start }")" -v d="$DELAY" -v same="$same" \
        'BEGIN { printf "| %s | %d | %s | %d | %.1f s | %.1f s | %.0f%% | %s |\n",
                 m, n, mode, st, ms, wall, (ms > 0 ? 100 * st * d / 1000 / (n * ms) : 0), same }'
    done
  done
done
