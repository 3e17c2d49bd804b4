#!/usr/bin/env bash
# Issue 22's cpu goals, in one run on this machine (docs/benchmarks.md,
# "Verified schedules"). For each zoo model at batch 1:
#   1. a search with verification (the default) on a fresh DB: its wall time,
#      the time verification took, the schedule it returns, and that
#      schedule's prediction against its verified end-to-end median;
#   2. the same search again on a fresh DB with --no-verify: its wall time
#      (the goal: verification within 1.1x the wall time of a search without);
#      with PLAIN=0 skipped, and the ratio taken as the search's wall time
#      over that time less its verification (what a search without would
#      have taken, noise aside: the searches are the same up to verifying);
#   3. ios-run of the returned schedule, sequential and greedy, interleaved
#      ROUNDS times, each figure the best of the rounds' medians (the goal:
#      returned <= 1.02 x min(sequential, greedy)).
#   bash bench/verify_cpu.sh [MODELS]     # default: squeezenet
# A model is a zoo name or torchvision:NAME, exported with its seeded random
# weights by scripts/export-torchvision.py (needs python3-torch,
# python3-torchvision and python3-onnx from Debian).
# Environment: RUNS (ios-run's timed runs, default 20), ROUNDS (default 2),
# THREADS (default every core), PLAIN (1: run the --no-verify search; 0:
# estimate it, default 1), SEARCH_ARGS (more ios-coordinator options for
# both searches, e.g. "-r 1 -s 8"), BIN (build directory, default build), OUT
# (results directory, default a new /tmp/verify_cpu.XXXXXX, kept).
set -euo pipefail

read -r -a MODELS <<<"${1:-squeezenet}"
RUNS="${RUNS:-20}"
ROUNDS="${ROUNDS:-2}"
PLAIN="${PLAIN:-1}"
read -r -a SEARCH_ARGS <<<"${SEARCH_ARGS:-}"
THREADS="${THREADS:-$(nproc)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
COORDINATOR="$BIN/coordinator/ios-coordinator"
IOS_RUN="$BIN/run/ios-run"
OUT="${OUT:-$(mktemp -d /tmp/verify_cpu.XXXXXX)}"
DEVICE="cpu,threads=$THREADS"
for program in "$COORDINATOR" "$IOS_RUN"; do
  [[ -x "$program" ]] || { echo "verify_cpu.sh: $program not found; build first (README)" >&2; exit 1; }
done

seconds() { date +%s.%N; }

# ios-run's median of one schedule, in ms.
run_median() {  # model schedule
  "$IOS_RUN" --model "$1" --schedule "$2" --device "$DEVICE" --runs "$RUNS" --no-predict \
    --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["measured_ms"]["median"])'
}

echo "search options: ${SEARCH_ARGS[*]:-(defaults)}"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%Y-%m-%dT%H:%MZ); device $DEVICE"
echo
echo "| model | search s (verify s) | search --no-verify s$( ((PLAIN)) || echo ' (estimated)') | returned | predicted ms | verified ms | ios-run returned / sequential / greedy ms | returned / min(seq, greedy) |"
echo "|---|---|---|---|---:|---:|---|---:|"
for entry in "${MODELS[@]}"; do
  model="$entry"
  dir="$OUT/${entry#torchvision:}"
  mkdir -p "$dir"
  if [[ "$entry" == torchvision:* ]]; then
    model="$dir/${entry#torchvision:}.onnx"
    /usr/bin/python3 "$ROOT/scripts/export-torchvision.py" "${entry#torchvision:}" --out "$dir" \
      >"$dir/export.log" 2>&1 ||
      { echo "verify_cpu.sh: export of $entry failed, see $dir/export.log" >&2; continue; }
  fi
  start=$(seconds)
  "$COORDINATOR" --model "$model" --device "$DEVICE" --db "$dir/verify.db" --out "$dir/returned.json" \
    "${SEARCH_ARGS[@]}" -q >"$dir/search.txt" 2>"$dir/search.log"
  search_s=$(echo "$(seconds) - $start" | bc)
  if ((PLAIN)); then
    start=$(seconds)
    "$COORDINATOR" --model "$model" --device "$DEVICE" --db "$dir/plain.db" --no-verify \
      "${SEARCH_ARGS[@]}" -q >"$dir/plain.txt" 2>"$dir/plain.log"
    plain_s=$(echo "$(seconds) - $start" | bc)
  fi
  read -r returned predicted verified verify_s < <(/usr/bin/python3 - "$dir/search.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
verify_s = re.search(r"verified end to end on .*, ([0-9.]+) s:", text).group(1)
for line in text.splitlines():
    if line.rstrip().endswith("<- returned"):
        # "  NAME(15) STAGES PREDICTED MEASURED SPREAD RATIO  <- returned"
        name = line[2:17].strip().replace(" ", "_")
        stages, predicted, measured = line[17:].split()[:3]
        print(name, predicted, measured, verify_s)
        break
PY
)
  declare -A best=()
  for ((round = 0; round < ROUNDS; ++round)); do
    for schedule in "$dir/returned.json" sequential greedy; do
      ms=$(run_median "$model" "$schedule")
      key=$(basename "$schedule")
      if [[ -z "${best[$key]:-}" ]] || (($(echo "$ms < ${best[$key]}" | bc))); then best[$key]=$ms; fi
    done
  done
  r=${best[returned.json]} s=${best[sequential]} g=${best[greedy]}
  ((PLAIN)) || plain_s=$(echo "$search_s - $verify_s" | bc)
  ratio=$(/usr/bin/python3 -c "print(f'{$r / min($s, $g):.3f}')")
  printf '| %s | %.1f (%s) | %.1f | %s | %s | %s | %.3f / %.3f / %.3f | %s |\n' "${entry#torchvision:}" "$search_s" \
    "$verify_s" "$plain_s" "$returned" "$predicted" "$verified" "$r" "$s" "$g" "$ratio"
  unset best
done
echo
echo "raw output: $OUT"
