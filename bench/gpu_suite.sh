#!/usr/bin/env bash
# The cuda backend's benchmark table (docs/gpu.md, "What a GPU run must
# show"). For each model and batch size: searches on the GPU through one
# ios-worker (lazy measurement, stages measured as executed, one DB for all)
# with strategy both, parallel and merge; then ios-run on the GPU of the
# sequential, greedy, IOS-Merge, IOS-Parallel and IOS-Both schedules, each as
# one replayed CUDA graph (ios-run's default on cuda), IOS-Both also
# streamed, with the DP's prediction and --check; and, where a CUDA build of
# PyTorch is installed, PyTorch eager and torch.cuda.graphs replay of the
# same network (Inception V3, SqueezeNet). Prints a markdown table for
# docs/benchmarks.md and, per case, issue 22's goals (the IOS graph <=
# min(sequential, greedy) graphs; predicted within 10% of it) met or MISSED;
# without a GPU it says so in one line and exits 1.
#   bash bench/gpu_suite.sh [CASES] [GPU]
#   CASES: "model:batch ...", default every zoo model at batch 1 and
#          Inception V3 at 16, 32, 64 and 128
# BIN (default build) names the build directory; RUNS (default 50) the
# timed end-to-end runs; DEVICE (default cuda:GPU) the device, e.g. cpu to
# try the script itself on a machine without a GPU (no CUDA graphs then).
set -euo pipefail

read -r -a CASES <<<"${1:-squeezenet:1 inception_v3:1 nasnet:1 randwire:1 inception_v3:16 inception_v3:32 inception_v3:64 inception_v3:128}"
GPU="${2:-0}"
RUNS="${RUNS:-50}"
DEVICE="${DEVICE:-cuda:$GPU}"
# On cuda every schedule runs as a graph (the default); IOS-Both is also
# timed streamed. Other devices run streamed only.
both=()
if [[ "$DEVICE" == cuda* ]]; then both=(--streams --cuda-graph); fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
WORK="$(mktemp -d)"
worker=""
cleanup() {
  if [[ -n "$worker" ]]; then kill "$worker" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! "$BIN/worker/ios-worker" --backend "$DEVICE" --check-device >"$WORK/device" 2>"$WORK/probe"; then
  echo "gpu_suite: no usable device $DEVICE: $(tail -n 1 "$WORK/probe")" >&2
  exit 1
fi
torch_gpu=false
if [[ "$DEVICE" == cuda* ]] &&
  /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  torch_gpu=true
fi

port=$((20000 + RANDOM % 20000))
"$BIN/worker/ios-worker" --backend "$DEVICE" --connect "tcp://127.0.0.1:$port" --id "bench" \
  --log-level warn 2>"$WORK/worker.log" &
worker=$!
db="$WORK/gpu.db"

json() {  # json FILE PYTHON-EXPRESSION-ON-d
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

search() {  # search MODEL BATCH STRATEGY -> prints "seconds measured stages/s", writes the schedule
  local start end
  start=$(date +%s.%N)
  "$BIN/coordinator/ios-coordinator" --model "$1" --batch "$2" --strategy "$3" --device "${DEVICE%%,*}" \
    --bind "tcp://127.0.0.1:$port" --min-workers 1 --db "$db" --out "$WORK/$1-$2-$3.json" -q \
    --log-level warn >/dev/null
  end=$(date +%s.%N)
  "$BIN/db/ios-db" --db "$db" searches --format json |
    /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)[-1]; n=s["stages_measured"]; t=s["measure_s"]; print(f"{float(sys.argv[2])-float(sys.argv[1]):.1f}", n, f"{n/t:.0f}" if t else "-")' "$start" "$end"
}

run() {  # run OUT SCHEDULE-ARGS...: ios-run on the GPU, JSON into OUT
  local out="$1"
  shift
  "$BIN/run/ios-run" --device "$DEVICE" --db "$db" --format json --runs "$RUNS" "$@" >"$out" ||
    true
}

echo "$(sed -n 's/^device: //p' "$WORK/device"), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
echo "$(sed -n 's/^fingerprint: //p' "$WORK/device")"
echo
echo "| model | batch | search (both) | stages measured | stages/s | sequential | greedy | IOS-Merge | IOS-Parallel | IOS-Both | IOS-Both predicted | IOS-Both streams | PyTorch eager | PyTorch graph | check |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
goals=()
for case in "${CASES[@]}"; do
  model="${case%%:*}"
  batch="${case##*:}"
  read -r search_s measured rate < <(search "$model" "$batch" both)
  search "$model" "$batch" parallel >/dev/null
  search "$model" "$batch" merge >/dev/null
  run "$WORK/seq.json" --model "$model" --batch "$batch" --schedule sequential --no-predict
  run "$WORK/greedy.json" --model "$model" --batch "$batch" --schedule greedy --no-predict
  run "$WORK/merge.json" --batch "$batch" --schedule "$WORK/$model-$batch-merge.json" --no-predict
  run "$WORK/parallel.json" --batch "$batch" --schedule "$WORK/$model-$batch-parallel.json" --no-predict
  run "$WORK/both.json" --batch "$batch" --schedule "$WORK/$model-$batch-both.json" "${both[@]}" \
    --check
  median() { json "$1" '"%.3f" % d["measured_ms"]["median"] if d.get("measured_ms") else "failed"'; }
  eager="-" torch_graph="-"
  if $torch_gpu && [[ "$model" == inception_v3 || "$model" == squeezenet ]]; then
    /usr/bin/python3 "$ROOT/bench/pytorch_peer.py" --device cuda --model "$model" --batch "$batch" \
      --mode eager,cuda_graph --runs "$RUNS" >"$WORK/torch.jsonl" 2>"$WORK/torch.err" || true
    eager=$(/usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(next((x["measured_ms"]["median"] for x in r if x["mode"]=="eager"), "-"))' "$WORK/torch.jsonl")
    torch_graph=$(/usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(next((x["measured_ms"]["median"] for x in r if x["mode"]=="cuda_graph"), "-"))' "$WORK/torch.jsonl")
  fi
  printf '| %s | %s | %s s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$model" "$batch" "$search_s" "$measured" "$rate" "$(median "$WORK/seq.json")" \
    "$(median "$WORK/greedy.json")" "$(median "$WORK/merge.json")" \
    "$(median "$WORK/parallel.json")" "$(median "$WORK/both.json")" \
    "$(json "$WORK/both.json" '"%.3f" % d["predicted_ms"] if d.get("predicted_ms") else "-"')" \
    "$(json "$WORK/both.json" '"%.3f" % d["streams_ms"]["median"] if d.get("streams_ms") and d.get("replay_ms") else "-"')" \
    "$eager" "$torch_graph" \
    "$(json "$WORK/both.json" '"passed" if d.get("check", {}).get("passed") else "FAILED"')"
  goals+=("$(/usr/bin/python3 -c 'import json, sys
m = [json.load(open(f)).get("measured_ms") or {} for f in sys.argv[2:5]]
p = json.load(open(sys.argv[4])).get("predicted_ms")
try:
    ios, best = m[2]["median"], min(m[0]["median"], m[1]["median"])
    fast = "met" if ios <= best else "MISSED"
    close = "met" if p is not None and abs(p - ios) <= 0.10 * ios else "MISSED"
    print(f"- {sys.argv[1]}: IOS-Both {ios:.3f} ms <= min(sequential, greedy) {best:.3f}: **{fast}**;"
          f" predicted {p if p is None else round(p, 3)} within 10%: **{close}**")
except (KeyError, TypeError):
    print(f"- {sys.argv[1]}: not measured")' "$model b$batch" "$WORK/seq.json" "$WORK/greedy.json" \
    "$WORK/both.json")")
done
echo
echo "(end-to-end medians in ms over $RUNS runs; on cuda each schedule replayed as one CUDA graph, ios-run's"
echo " default; IOS-Both streams: the same schedule on CUDA streams; stages/s: stages measured per second of"
echo " the search's measuring; check: ios-run --check of IOS-Both against sequential, the cpu backend and"
echo " the streamed run)"
echo
echo "Issue 22's goals, per case:"
printf '%s\n' "${goals[@]}"
