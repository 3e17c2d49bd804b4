#!/usr/bin/env bash
# gpu-check: everything the project wants to know from a GPU host, in one
# bounded run of the GPU host bundle (scripts/pack-worker.sh --gpu-host):
#   1. the gpu-labelled tests (cuda_gpu_test, backend_conformance_test);
#   2. ios-run --check of every zoo model (sequential schedule, run as a
#      CUDA graph, ios-run's default on cuda, and checked against streams);
#   2b. ONNX models packed in share/models (pack-worker.sh's MODELS_DIR), each
#      run under greedy against its reference output (--expect) and --check;
#   3. a search (the default: lazy, stages measured as executed) of every
#      zoo model at batch 1 and of SqueezeNet and Inception V3 at batch 16,
#      each in a fresh DB, timed: stages measured per second of measuring;
#   4. sequential, greedy and IOS of each, streamed and as CUDA graphs
#      (ios-run --streams --cuda-graph), with the DP's prediction, beside
#      PyTorch eager, TorchScript (frozen), CUDA graph replay and
#      torch.compile (reduce-overhead) for SqueezeNet and Inception V3, where
#      the host's python3 has a CUDA PyTorch and torchvision;
# then prints one markdown table for docs/benchmarks.md and issue 22's cuda
# goals, each "met" or "MISSED" with its figures (docs/gpu.md, "What a GPU
# run must show"). A missed goal is a figure to record, not a failed check.
#   bin/gpu-check [OUT_DIR]     (default: a new folder under /tmp)
# Exit: 0 all checks passed, 1 a check failed, 77 no usable GPU here (one
# line says why, and which CUDA runtime and cuDNN were found).
# GPU (default 0) picks the GPU, RUNS (default 50) the timed runs, PYTHON the
# interpreter with PyTorch (default python3), CASES (default "squeezenet:1
# inception_v3:1 nasnet:1 randwire:1 squeezenet:16 inception_v3:16") the
# searched model:batch pairs.
set -uo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
# PyTorch brings its own cuDNN and refuses an older one found first on the
# path (the peers failed so on an H200 host whose system cuDNN was 9.14 and
# torch's 9.19): the peers run with the host's own library path.
host_library_path="${LD_LIBRARY_PATH:-}"
# shellcheck source=scripts/find-gpu-libs.sh
. "$here/lib/find-gpu-libs.sh"
out="${1:-$(mktemp -d /tmp/gpu-check.XXXXXX)}"
mkdir -p "$out"
gpu="${GPU:-0}"
runs="${RUNS:-50}"
read -r -a cases <<<"${CASES:-squeezenet:1 inception_v3:1 nasnet:1 randwire:1 squeezenet:16 inception_v3:16}"
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
# The tests are not behind wrappers: they get the packed libraries, and the
# packed ios-run and test data in place of their build tree's, here.
for test in cuda_gpu_test backend_conformance_test; do
  if ! LD_LIBRARY_PATH="$here/lib:$LD_LIBRARY_PATH" IOS_RUN="$bin/ios-run" IOS_TEST_DATA="$here/share/testdata" \
    timeout 180 "$here/libexec/tests/$test" >"$out/$test.log" 2>&1; then
    fail "$test (see $out/$test.log): $(grep -m 3 'FAILED\|Failure' "$out/$test.log" | tr '\n' ' ')"
  elif grep '^\[  SKIPPED \]' "$out/$test.log" | grep -v -q 'OnTwoGpus'; then
    # Only the cases that need two GPUs may skip (on a one-GPU host).
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
  timeout 240 "$bin/ios-run" --device "$device" --format json --runs "$runs" "$@" \
    >"$file" 2>"$file.err"
}

goals=()
goal() {  # goal TEXT PYTHON-CONDITION DETAIL: one line of the goals, met or MISSED
  local verdict
  verdict="$("$python" -c 'import sys
try:
    print("met" if eval(sys.argv[1]) else "MISSED")
except Exception:
    print("not measured")' "$2" 2>/dev/null || echo "not measured")"
  goals+=("- $1: **$verdict** ($3)")
}

# 2. Every zoo model, run as ios-run runs it on cuda (a CUDA graph), checked
# against sequential streams, the cpu backend and the streamed output.
for model in squeezenet inception_v3 nasnet randwire; do
  if run "$out/check-$model.json" --model "$model" --schedule sequential --check --no-predict &&
    [[ "$(json "$out/check-$model.json" 'd["check"]["passed"] and d["execution"] == "graph"')" == True ]]; then
    note "ios-run --check $model (as a CUDA graph): passed"
  else
    fail "ios-run --check $model: $(tail -n 1 "$out/check-$model.json.err")"
  fi
done

# 2b. ONNX models packed with the bundle (pack-worker.sh's MODELS_DIR):
# each M.onnx with M.in.bin and M.out.bin (another framework's output,
# scripts/export-torchvision.py or onnxruntime_reference.js) runs on the GPU
# under greedy with --expect and --check.
for model in "$here"/share/models/*.onnx; do
  [[ -e "$model" ]] || break
  name="$(basename "$model" .onnx)"
  base="${model%.onnx}"
  if [[ ! -e "$base.in.bin" || ! -e "$base.out.bin" ]]; then
    note "model $name: no $name.in.bin and $name.out.bin beside it; skipped"
    continue
  fi
  if run "$out/model-$name.json" --model "$model" --schedule greedy --input "$base.in.bin" \
    --expect "$base.out.bin" --check --no-predict &&
    [[ "$(json "$out/model-$name.json" 'd["expect"]["passed"] and d["check"]["passed"]')" == True ]]; then
    note "model $name on the GPU: matches its reference ($(json "$out/model-$name.json" \
      '"%.3g of %.3g" % (d["expect"]["schedule_max_abs_diff"], d["expect"]["max_abs_reference"])'))"
  else
    fail "model $name on the GPU: $(tail -n 1 "$out/model-$name.json.err")"
  fi
done

# 3 and 4. Searches, schedules and peers.
peers=false
if LD_LIBRARY_PATH="$host_library_path" timeout 60 "$python" -c 'import sys, torch, torchvision
sys.exit(0 if torch.cuda.is_available() else 1)' 2>"$out/torch.err"; then
  peers=true
else
  note "PyTorch peers skipped: $python has no CUDA PyTorch with torchvision ($(tail -n 1 "$out/torch.err"))"
fi
rows=()
for case in "${cases[@]}"; do
  model="${case%%:*}"
  batch="${case##*:}"
  tag="$model-b$batch"
  # A fresh DB per case: every stage the search needs is measured, so its
  # rate is the profiling rate.
  db="$out/gpu-$tag.db"
  started=$(date +%s.%N)
  if ! timeout 900 "$bin/ios-coordinator" --model "$model" --batch "$batch" --device "$device" \
    --db "$db" --out "$out/$tag.json" -q >"$out/search-$tag.log" 2>&1; then
    fail "search of $model at batch $batch (see $out/search-$tag.log)"
    continue
  fi
  wall="$("$python" -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' \
    "$started" "$(date +%s.%N)" 2>/dev/null || echo "-")"
  timeout 60 "$bin/ios-db" --db "$db" searches --format json >"$out/searches-$tag.json" 2>&1
  measured="$(json "$out/searches-$tag.json" 'd[-1]["stages_measured"]')"
  rate="$(json "$out/searches-$tag.json" '"%.0f" % (d[-1]["stages_measured"] / d[-1]["measure_s"])')"
  note "search $model b$batch: $measured stages measured, $rate stages/s of measuring, ${wall}s in all"
  cells=()
  for schedule in sequential greedy "$out/$tag.json"; do
    name="$(basename "$schedule" .json)"
    file="$out/run-$tag-$name.json"
    run "$file" --model "$model" --batch "$batch" --schedule "$schedule" --db "$db" --streams \
      --cuda-graph || fail "ios-run $model b$batch $name: $(tail -n 1 "$file.err")"
    cell="$(json "$file" '"%.3f / %.3f" % (d["streams_ms"]["median"], d["replay_ms"]["median"])')"
    if [[ "$schedule" == "$out/$tag.json" ]]; then
      cell="$cell ($(json "$file" '"%.3f" % d["predicted_ms"]'))"
    fi
    cells+=("$cell")
  done
  graph() { json "$out/run-$tag-$1.json" 'd["replay_ms"]["median"]'; }
  ios="$(graph "$tag")"
  sequential="$(graph sequential)"
  greedy="$(graph greedy)"
  predicted="$(json "$out/run-$tag-$tag.json" 'd["predicted_ms"]')"
  goal "$model b$batch: the returned schedule as a graph <= min(sequential, greedy) as graphs" \
    "$ios <= min($sequential, $greedy)" "IOS $ios ms, sequential $sequential, greedy $greedy"
  goal "$model b$batch: predicted within 10% of the graph replay" \
    "abs($predicted - $ios) <= 0.10 * $ios" "predicted $predicted ms, replayed $ios"
  torch_cells=("-" "-" "-" "-")
  if $peers && [[ "$model" == squeezenet || "$model" == inception_v3 ]]; then
    LD_LIBRARY_PATH="$host_library_path" timeout 300 "$python" "$here/share/pytorch_peer.py" --device cuda --model "$model" \
      --batch "$batch" --mode eager,jit_frozen,cuda_graph,compile --runs "$runs" \
      >"$out/torch-$tag.jsonl" 2>"$out/torch-$tag.err" ||
      note "PyTorch peer of $model b$batch: $(tail -n 1 "$out/torch-$tag.err")"
    i=0
    for mode in eager jit_frozen cuda_graph compile; do
      torch_cells[i]="$("$python" -c 'import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print(next(("%.3f" % r["measured_ms"]["median"] for r in rows if r["mode"] == sys.argv[2]), "-"))' \
        "$out/torch-$tag.jsonl" "$mode" 2>/dev/null || echo "-")"
      i=$((i + 1))
    done
  fi
  if [[ "$tag" == inception_v3-b1 ]]; then
    best="$("$python" -c 'import sys
values = [float(v) for v in sys.argv[1:] if v != "-"]
print(min(values) if values else "-")' "${torch_cells[@]}")"
    goal "inception_v3 b1: >= 1.5x the best PyTorch peer" "$best / $ios >= 1.5" \
      "best of eager, TorchScript, CUDA graph, torch.compile $best ms; IOS as a graph $ios"
    goal "inception_v3 b1: >= 150 stages/s profiling" "$rate >= 150" \
      "$measured stages measured at $rate stages/s of measuring, ${wall}s search"
  fi
  rows+=("| $model b$batch | ${cells[0]} | ${cells[1]} | ${cells[2]} | ${torch_cells[0]} | ${torch_cells[1]} | ${torch_cells[2]} | ${torch_cells[3]} | $rate |")
done

echo
echo "$(sed -n 's/^device: //p' "$out/device"), $(date -u '+%Y-%m-%d %H:%M UTC'); libraries: $IOS_GPU_LIBS"
echo
echo "| model, batch | sequential streams / graph | greedy streams / graph | IOS streams / graph (DP predicted) | PyTorch eager | TorchScript frozen | CUDA graph | torch.compile reduce-overhead | search stages/s |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "(ms, medians of $runs runs; graph: the schedule replayed as one CUDA graph, ios-run's default;"
echo " stages/s: stages measured per second of the search's measuring, a fresh DB per case; strict FP32)"
echo
echo "Issue 22's cuda goals:"
printf '%s\n' "${goals[@]}"
if ((failures > 0)); then
  note "$failures check(s) FAILED; logs in $out"
  exit 1
fi
note "every check passed; logs in $out"
