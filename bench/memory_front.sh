#!/usr/bin/env bash
# Memory-bounded IOS (issue 24): the latency/peak-memory front of each model
# (ios-coordinator --memory-front: the unconstrained search, the least-peak
# one, budgets evenly between, and one at the sequential schedule's peak),
# then one markdown row per model and batch: the unconstrained IOS schedule,
# the least-peak one, sequential, and the fastest schedule that fits in
# sequential's peak. Latencies are the DP's (sums of measured stages).
#   bash bench/memory_front.sh [MODELS] [BATCHES] [DEVICE]
#     defaults: "inception_v3 nasnet randwire" "1 16" sim:v100
# Environment: POINTS (--memory-front N, default 6), BIN (build directory,
# default build), COORDINATOR (override the program), OUT (directory for the
# DB, logs and tables; default a new /tmp/memory_front.XXXXXX, kept). One
# profiling DB per device under OUT: a rerun measures nothing.
set -euo pipefail

read -r -a MODELS <<<"${1:-inception_v3 nasnet randwire}"
read -r -a BATCHES <<<"${2:-1 16}"
DEVICE="${3:-sim:v100}"
POINTS="${POINTS:-6}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
COORDINATOR="${COORDINATOR:-$BIN/coordinator/ios-coordinator}"
OUT="${OUT:-$(mktemp -d /tmp/memory_front.XXXXXX)}"
mkdir -p "$OUT"
DB="$OUT/${DEVICE//[^A-Za-z0-9]/_}.db"
[[ -x "$COORDINATOR" ]] || { echo "memory_front.sh: $COORDINATOR not found; build first" >&2; exit 1; }

summary="$OUT/summary.md"
{
  echo "| model | batch | IOS unconstrained | least peak | sequential | best within sequential's peak | its slowdown | searches (dominated) | stages measured | wall s |"
  echo "|---|---:|---|---|---|---|---:|---:|---:|---:|"
} >"$summary"
for model in "${MODELS[@]}"; do
  for batch in "${BATCHES[@]}"; do
    log="$OUT/${model//[^A-Za-z0-9_]/_}_b$batch"
    start=$(date +%s.%N)
    "$COORDINATOR" --model "$model" --device "$DEVICE" --batch "$batch" --db "$DB" \
      --memory-front "$POINTS" >"$log.txt" 2>"$log.err"
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    sed -n '/^memory front of/,/^all latencies\|^(peak/p' "$log.txt"
    echo
    # "least peak 24.52 MiB at 3.133 ms (1.079x); unconstrained IOS 58.61 MiB at 2.902 ms"
    ends=$(grep '^least peak ' "$log.txt")
    least=$(sed -E 's/^least peak ([0-9.]+ [A-Za-z]+) at ([0-9.]+ ms).*/\2 @ \1/' <<<"$ends")
    free=$(sed -E 's/.*unconstrained IOS ([0-9.]+ [A-Za-z]+) at ([0-9.]+ ms)$/\2 @ \1/' <<<"$ends")
    seq=$(awk '$1 == "sequential" && $5 == "ms" {print $4 " ms @ " $2 " " $3}' "$log.txt")
    fits=$(grep "^at the sequential schedule's peak" "$log.txt" || true)
    best=$(sed -E 's/^[^:]*: ([0-9.]+ ms) at ([^,]+),.*/\1 @ \2/' <<<"$fits")
    slowdown=$(sed -E 's/.*, ([0-9.]+x) the unconstrained.*/\1/' <<<"$fits")
    # "...: 7 searches (1910 stages measured in all), 0 dominated ..."
    counts=$(sed -nE 's/.*: ([0-9]+) searches \(([0-9]+) stages measured in all\), ([0-9]+) dominated.*/\1 (\3) | \2/p' "$log.txt")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %.1f |\n' "$model" "$batch" "$free" \
      "$least" "$seq" "$best" "$slowdown" "$counts" "$wall" >>"$summary"
  done
done
cat "$summary"
echo "memory_front.sh: logs, DB and summary in $OUT" >&2
