#!/usr/bin/env bash
# CPU end to end (issue 8): for each model and batch size, an IOS search on
# the cpu backend (wall time, stages measured), then ios-run of the
# sequential, greedy and IOS schedules, then the PyTorch peer
# (bench/pytorch_peer.py: eager and frozen TorchScript) with the same thread
# count, in the same run on the same machine. Prints markdown tables.
#   bash bench/cpu_e2e.sh [MODELS] [BATCHES]     # defaults: "squeezenet inception_v3" "1 8"
# A model is a zoo name or torchvision:NAME: the latter is exported with its
# (seeded, random) weights by scripts/export-torchvision.py and goes through
# the ONNX importer; the search row then also gives the import time and the
# blocks and parts found, and the PyTorch peer is the torchvision model itself
# (issue 11). Exports are at batch 1: give BATCHES 1 for them.
# Environment: RUNS (timed runs of each, default 5), THREADS (threads of both
# sides: --device cpu,threads=N for the search and ios-run, torch.set_num_threads
# for PyTorch; default every core), BIN (build directory,
# default build), OUT (directory for the DB, schedules, logs and raw
# results.jsonl; default a new /tmp/cpu_e2e.XXXXXX, kept), COORDINATOR,
# IOS_RUN, IOS_DB, PEER, EXPORT (override the programs, e.g. with fakes to test the
# script; with PEER set, PyTorch is neither needed nor installed),
# HIGH_PRIORITY=1 (root: run every timed program in a scheduler autogroup of
# its own at nice -10, so other users' jobs on a shared machine take less CPU
# from both sides alike; default off).
# Installs python3-torch, python3-torchvision and libopenblas0-pthread (the
# peer's BLAS, see below) with apt-get when missing
# (as root; the build never needs them). Results go to docs/benchmarks.md by hand.
set -euo pipefail

read -r -a MODELS <<<"${1:-squeezenet inception_v3}"
read -r -a BATCHES <<<"${2:-1 8}"
RUNS="${RUNS:-5}"
THREADS="${THREADS:-$(nproc)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
COORDINATOR="${COORDINATOR:-$BIN/coordinator/ios-coordinator}"
IOS_RUN="${IOS_RUN:-$BIN/run/ios-run}"
IOS_DB="${IOS_DB:-$BIN/db/ios-db}"
PY=/usr/bin/python3
PEER="${PEER:-}"
EXPORT="${EXPORT:-$PY $ROOT/scripts/export-torchvision.py}"
OUT="${OUT:-$(mktemp -d /tmp/cpu_e2e.XXXXXX)}"
mkdir -p "$OUT"
DB="$OUT/cpu.db"
DEVICE="cpu,threads=$THREADS"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

for program in "$COORDINATOR" "$IOS_RUN" "$IOS_DB"; do
  [[ -x "$program" ]] || { echo "cpu_e2e.sh: $program not found; build first (README)" >&2; exit 1; }
done

# Debian's PyTorch calls a generic BLAS for MatMul and Linear: the reference
# (netlib) one unless an optimised one is installed, which made ConvNeXt's
# pointwise layers 60 ms each. OpenBLAS gives the peer its fair speed.
if [[ -z "$PEER" ]] && { ! "$PY" -c 'import torch, torchvision' 2>/dev/null ||
  ! dpkg -s libopenblas0-pthread >/dev/null 2>&1; }; then
  echo "cpu_e2e.sh: installing python3-torch python3-torchvision libopenblas0-pthread (Debian)" >&2
  as_root=()
  [[ $EUID -eq 0 ]] || as_root=(sudo)
  "${as_root[@]}" apt-get install -y python3-torch python3-torchvision libopenblas0-pthread \
    >"$OUT/apt.log"
fi

# Runs "$@"; with HIGH_PRIORITY=1 in a session (scheduler autogroup) of its
# own at nice -10: with autogroups, plain nice only ranks processes of one session.
timed() {
  if [[ "${HIGH_PRIORITY:-0}" == 1 ]]; then
    setsid -w bash -c 'echo -10 >/proc/self/autogroup && exec "$@"' timed "$@"
  else
    "$@"
  fi
}

# Appends the JSON object on stdin (one object, any layout) to results.jsonl,
# with the extra fields given as a JSON object in $1.
record() {
  "$PY" -c 'import json, sys
extra = json.loads(sys.argv[1])
for line in sys.stdin.read().strip().splitlines() if sys.argv[2] == "lines" else [sys.stdin.read()]:
    if line.strip():
        print(json.dumps({**json.loads(line), **extra}))' "$1" "${2:-one}" >>"$RESULTS"
}

# The search report's block table (stdout of ios-coordinator) and the import
# line of its log, as one JSON object: blocks, parts, the largest part and
# widest one, the DP's states and transitions, the import time.
search_shape() {
  "$PY" -c 'import json, re, sys
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 6 and f[0].isdigit() and f[1].isdigit():
        rows.append([int(v) for v in f[:6]])
imported = re.search(r"imported in ([0-9.]+) s", open(sys.argv[2]).read())
print(json.dumps({"blocks": len({r[0] for r in rows}), "parts": len(rows),
                  "max_part": max((r[2] for r in rows), default=None),
                  "max_width": max((r[3] for r in rows), default=None),
                  "dp_states": sum(r[4] for r in rows), "dp_transitions": sum(r[5] for r in rows),
                  "import_s": float(imported.group(1)) if imported else None}))' "$1" "$2"
}

for entry in "${MODELS[@]}"; do
  model="$entry" peer_model="$entry"
  if [[ "$entry" == torchvision:* ]]; then
    model="$OUT/${entry#torchvision:}.onnx"
    if [[ ! -f "$model" ]]; then
      echo "cpu_e2e.sh: exporting $entry" >&2
      $EXPORT "${entry#torchvision:}" --out "$OUT" \
        >"$OUT/${entry#torchvision:}.export.log" 2>&1 ||
        { echo "cpu_e2e.sh: export of $entry failed, see $OUT/${entry#torchvision:}.export.log" >&2; continue; }
    fi
  fi
  for batch in "${BATCHES[@]}"; do
    tag="$(basename "$model" .onnx)-b$batch"
    echo "cpu_e2e.sh: $tag: search" >&2
    start=$(date +%s.%N)
    if timed "$COORDINATOR" --model "$model" --batch "$batch" --device "$DEVICE" --db "$DB" \
      --out "$OUT/$tag.json" >"$OUT/$tag.search.txt" 2>"$OUT/$tag.search.log"; then
      end=$(date +%s.%N)
      shape=$(search_shape "$OUT/$tag.search.txt" "$OUT/$tag.search.log")
      "$IOS_DB" --db "$DB" searches --format json |
        "$PY" -c 'import json, sys
s = json.load(sys.stdin)[-1]
print(json.dumps({**{k: s.get(k) for k in ("stages_measured", "stages_reused", "enumerate_s",
                                         "measure_s", "solve_s")}, **json.loads(sys.argv[1])}))' \
          "$shape" |
        record "{\"row\": \"search\", \"model\": \"$entry\", \"batch\": $batch,
                 \"wall_s\": $(awk "BEGIN { print $end - $start }")}"
      schedules=(sequential greedy "$OUT/$tag.json")
    else
      echo "cpu_e2e.sh: $tag: search failed, see $OUT/$tag.search.log" >&2
      echo "{}" | record "{\"row\": \"search\", \"model\": \"$entry\", \"batch\": $batch,
                           \"failed\": true}"
      schedules=(sequential greedy)
    fi
    for schedule in "${schedules[@]}"; do
      name=$([[ "$schedule" == */* ]] && echo ios || echo "$schedule")
      echo "cpu_e2e.sh: $tag: ios-run $name" >&2
      if timed "$IOS_RUN" --model "$model" --schedule "$schedule" --device "$DEVICE" --batch "$batch" \
        --db "$DB" --runs "$RUNS" --format json >"$OUT/$tag.$name.json" \
        2>"$OUT/$tag.$name.log"; then
        record "{\"row\": \"ios-run\", \"name\": \"$name\", \"model\": \"$entry\",
                 \"batch\": $batch}" <"$OUT/$tag.$name.json"
      else
        echo "cpu_e2e.sh: $tag: ios-run $name failed, see $OUT/$tag.$name.log" >&2
        echo "{}" | record "{\"row\": \"ios-run\", \"name\": \"$name\", \"model\": \"$entry\",
                             \"batch\": $batch, \"failed\": true}"
      fi
    done
    echo "cpu_e2e.sh: $tag: PyTorch" >&2
    if timed "${PEER:-$ROOT/bench/pytorch_peer.py}" --model "$peer_model" --batch "$batch" \
      --threads "$THREADS" --runs "$RUNS" >"$OUT/$tag.pytorch.jsonl" 2>"$OUT/$tag.pytorch.log"; then
      record '{"row": "pytorch"}' lines <"$OUT/$tag.pytorch.jsonl"
    else
      echo "cpu_e2e.sh: $tag: the PyTorch peer failed, see $OUT/$tag.pytorch.log" >&2
    fi
  done
done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "Machine: $cpu, $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); $THREADS threads each side;" \
  "$RUNS timed runs each; load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "high priority ${HIGH_PRIORITY:-0}"
echo
"$PY" - "$RESULTS" <<'EOF'
import json, sys

rows = [json.loads(line) for line in open(sys.argv[1])]
cell = lambda v, fmt="{:.2f}": "" if v is None else fmt.format(v)

print("| model | batch | import | blocks / parts | largest / widest part | DP states / "
      "transitions | search wall | stages measured | reused | measure phase |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    if r["row"] == "search":
        if r.get("failed"):
            print(f"| {r['model']} | {r['batch']} | | | | | failed | | | |")
        else:
            print(f"| {r['model']} | {r['batch']} | {cell(r.get('import_s'), '{:.2f} s')} | "
                  f"{r.get('blocks')} / {r.get('parts')} | "
                  f"{r.get('max_part')} / {r.get('max_width')} | "
                  f"{cell(r.get('dp_states'), '{:,}')} / {cell(r.get('dp_transitions'), '{:,}')} | "
                  f"{cell(r['wall_s'], '{:.1f} s')} | "
                  f"{cell(r['stages_measured'], '{:,}')} | {cell(r['stages_reused'], '{:,}')} | "
                  f"{cell(r['measure_s'], '{:.1f} s')} |")
print()
print("| model | batch | schedule / peer | min ms | median ms | max ms | predicted ms | "
      "predicted vs median | peak activations | IOS speed-up |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
keys = []
for r in rows:
    if r["row"] != "search" and (r["model"], r["batch"]) not in keys:
        keys.append((r["model"], r["batch"]))
for model, batch in keys:
    group = [r for r in rows if r["row"] != "search" and (r["model"], r["batch"]) == (model, batch)]
    ios = next((r for r in group if r["row"] == "ios-run" and r["name"] == "ios"
                and not r.get("failed")), None)
    for r in group:
        label = (f"ios-run {r['name'].replace('ios', 'IOS')}" if r["row"] == "ios-run"
                 else f"PyTorch {r['torch']} {r['mode'].replace('_', ' ')}")
        if r.get("failed"):
            print(f"| {model} | {batch} | {label} | failed | | | | | | |")
            continue
        m, predicted = r["measured_ms"], r.get("predicted_ms")
        error = cell(None if predicted is None else (predicted - m["median"]) / m["median"] * 100,
                     "{:+.1f}%")
        peak = cell(r.get("peak_activation_bytes"), "{:.1f} MB")
        peak = peak and cell(r["peak_activation_bytes"] / 1e6, "{:.1f} MB")
        speedup = "" if ios is None else f"{m['median'] / ios['measured_ms']['median']:.2f}x"
        print(f"| {model} | {batch} | {label} | {cell(m['min'])} | {cell(m['median'])} | "
              f"{cell(m['max'])} | {cell(predicted)} | {error} | {peak} | {speedup} |")
print()
print("IOS speed-up: median of the row / median of the IOS schedule (above 1: IOS is faster).")
EOF
echo "cpu_e2e.sh: raw results in $RESULTS" >&2
