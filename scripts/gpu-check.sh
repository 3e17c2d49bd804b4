#!/usr/bin/env bash
# gpu-check: everything the project wants to know from a GPU host, in one
# bounded run of the GPU host bundle (scripts/pack-worker.sh --gpu-host):
#   1. the gpu-labelled tests (cuda_gpu_test, backend_conformance_test);
#   2. ios-run --check --cuda-graph of every zoo model (sequential schedule);
#   3. a lazy search of SqueezeNet and Inception V3 at batch 1 on the GPU;
#   4. sequential, greedy and IOS of both, streamed and as CUDA graphs, with
#      the DP's prediction, beside PyTorch eager, TorchScript (frozen), CUDA
#      graph replay and torch.compile (reduce-overhead), where the host's
#      python3 has a CUDA PyTorch and torchvision;
# then prints one markdown table for docs/benchmarks.md.
#   bin/gpu-check [OUT_DIR]     (default: a new folder under /tmp)
# Exit: 0 all checks passed, 1 a check failed, 77 no usable GPU here (one
# line says why, and which CUDA runtime and cuDNN were found).
# GPU (default 0) picks the GPU, RUNS (default 50) the timed runs, PYTHON the
# interpreter with PyTorch (default python3).
set -uo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/find-gpu-libs.sh
. "$here/lib/find-gpu-libs.sh"
out="${1:-$(mktemp -d /tmp/gpu-check.XXXXXX)}"
mkdir -p "$out"
gpu="${GPU:-0}"
runs="${RUNS:-50}"
python="${PYTHON:-python3}"
# The GPU is picked for every tool at once; the searches' --device then
# names the kind (a coordinator selects workers by backend, name or
# fingerprint, not by ordinal).
export CUDA_VISIBLE_DEVICES="$gpu"
device="cuda"
bin="$here/bin"
failures=0

note() { echo "gpu-check: $*" >&2; }
fail() {
  note "FAILED: $*"
  failures=$((failures + 1))
}

note "CUDA runtime and cuDNN: $IOS_GPU_LIBS"
if ! timeout 60 "$bin/ios-worker" --backend "$device" --check-device >"$out/device" 2>"$out/device.err"; then
  echo "gpu-check: no usable GPU here: $(tail -n 1 "$out/device.err") (found: $IOS_GPU_LIBS)"
  exit 77
fi
note "$(head -n 1 "$out/device"); results in $out"
command -v nvidia-smi >/dev/null &&
  timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >"$out/nvidia-smi.csv" 2>&1

# 1. The gpu-labelled tests.
# On a GPU host nothing may skip: a skipped gpu test is a check not made.
for test in cuda_gpu_test backend_conformance_test; do
  if ! timeout 180 "$here/libexec/tests/$test" >"$out/$test.log" 2>&1; then
    fail "$test (see $out/$test.log): $(grep -m 3 'FAILED\|Failure' "$out/$test.log" | tr '\n' ' ')"
  elif grep -q '^\[  SKIPPED \]' "$out/$test.log"; then
    fail "$test skipped cases on a GPU host: $(grep -m 3 '^\[  SKIPPED \]' "$out/$test.log" | tr '\n' ' ')"
  elif ! grep -q '^\[  PASSED  \]' "$out/$test.log"; then
    fail "$test reported no passed cases (see $out/$test.log)"
  else
    note "$test: $(grep -c '^\[       OK \]' "$out/$test.log") cases passed"
  fi
done

json() {  # json FILE PYTHON-EXPRESSION-ON-d: prints "-" when the file is unusable
  "$python" -c 'import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print(eval(sys.argv[2]))
except Exception:
    print("-")' "$1" "$2" 2>/dev/null || echo "-"
}

run() {  # run OUT ARGS...: ios-run on the GPU as JSON
  local file="$1"
  shift
  timeout 240 "$bin/ios-run" --device "$device" --format json --runs "$runs" --cuda-graph "$@" \
    >"$file" 2>"$file.err"
}

# 2. Every zoo model, checked against sequential, the cpu backend and replay.
for model in squeezenet inception_v3 nasnet randwire; do
  if run "$out/check-$model.json" --model "$model" --schedule sequential --check --no-predict &&
    [[ "$(json "$out/check-$model.json" 'd["check"]["passed"]')" == True ]]; then
    note "ios-run --check --cuda-graph $model: passed"
  else
    fail "ios-run --check --cuda-graph $model: $(tail -n 1 "$out/check-$model.json.err")"
  fi
done

# 3 and 4. Searches, schedules and peers.
db="$out/gpu.db"
peers=false
if timeout 60 "$python" -c 'import sys, torch, torchvision
sys.exit(0 if torch.cuda.is_available() else 1)' 2>"$out/torch.err"; then
  peers=true
else
  note "PyTorch peers skipped: $python has no CUDA PyTorch with torchvision ($(tail -n 1 "$out/torch.err"))"
fi
rows=()
for model in squeezenet inception_v3; do
  if ! timeout 300 "$bin/ios-coordinator" --model "$model" --batch 1 --device "$device" --db "$db" \
    --out "$out/$model.json" -q >"$out/search-$model.log" 2>&1; then
    fail "search of $model (see $out/search-$model.log)"
    continue
  fi
  cells=()
  for schedule in sequential greedy "$out/$model.json"; do
    name="$(basename "$schedule" .json)"
    run "$out/run-$model-$name.json" --model "$model" --schedule "$schedule" --db "$db" ||
      fail "ios-run $model $name: $(tail -n 1 "$out/run-$model-$name.json.err")"
    cell="$(json "$out/run-$model-$name.json" '"%.3f / %.3f" % (d["measured_ms"]["median"], d["replay_ms"]["median"])')"
    if [[ "$schedule" == "$out/$model.json" ]]; then
      cell="$cell ($(json "$out/run-$model-$name.json" '"%.3f" % d["predicted_ms"]'))"
    fi
    cells+=("$cell")
  done
  torch_cells=("-" "-" "-" "-")
  if $peers; then
    timeout 300 "$python" "$here/share/pytorch_peer.py" --device cuda --model "$model" --batch 1 \
      --mode eager,jit_frozen,cuda_graph,compile --runs "$runs" >"$out/torch-$model.jsonl" \
      2>"$out/torch-$model.err" || note "PyTorch peer of $model: $(tail -n 1 "$out/torch-$model.err")"
    i=0
    for mode in eager jit_frozen cuda_graph compile; do
      torch_cells[i]="$("$python" -c 'import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print(next(("%.3f" % r["measured_ms"]["median"] for r in rows if r["mode"] == sys.argv[2]), "-"))' \
        "$out/torch-$model.jsonl" "$mode" 2>/dev/null || echo "-")"
      i=$((i + 1))
    done
  fi
  rows+=("| $model b1 | ${cells[0]} | ${cells[1]} | ${cells[2]} | ${torch_cells[0]} | ${torch_cells[1]} | ${torch_cells[2]} | ${torch_cells[3]} |")
done

echo
echo "$(sed -n 's/^device: //p' "$out/device"), $(date -u '+%Y-%m-%d %H:%M UTC'); libraries: $IOS_GPU_LIBS"
echo
echo "| model, batch | sequential streams / graph | greedy streams / graph | IOS streams / graph (DP predicted) | PyTorch eager | TorchScript frozen | CUDA graph | torch.compile reduce-overhead |"
echo "|---|---|---|---|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "(ms, medians of $runs runs; graph: the schedule replayed as one CUDA graph; strict FP32)"
if ((failures > 0)); then
  note "$failures check(s) FAILED; logs in $out"
  exit 1
fi
note "every check passed; logs in $out"
