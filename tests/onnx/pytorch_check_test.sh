#!/usr/bin/env bash
# Issue 11: torchvision models go from a PyTorch export to a run that matches
# PyTorch's own output: scripts/export-torchvision.py writes MODEL.onnx, an
# input and PyTorch's output; ios-coordinator searches an IOS schedule (on
# the simulated V100: fast, and the schedule's merges and concurrent stages
# are what matters here); ios-run checks the scheduled and the sequential
# outputs on the cpu backend with --expect. Needs Debian's python3-torch,
# python3-torchvision and python3-onnx in /usr/bin/python3, and skips
# (ctest's SKIP_RETURN_CODE 77) saying so when they are absent.
# Usage: pytorch_check_test.sh SRC BIN [MODEL[:HEAD] ...]   (HEAD: softmax or
# logsoftmax, appended to the model by the export script)
set -euo pipefail
src="$1" bin="$2"
shift 2
models=("$@")
((${#models[@]})) || models=(squeezenet1_1 googlenet mobilenet_v2 mobilenet_v3_small efficientnet_b0
  resnet50 inception_v3 densenet121 squeezenet1_1:logsoftmax shufflenet_v2_x0_5 convnext_tiny
  vit_mini swin_mini maxvit_mini)
if ! /usr/bin/python3 -c "import torch, torchvision, onnx" 2>/dev/null; then
  echo "SKIPPED: needs Debian's python3-torch, python3-torchvision and python3-onnx" \
    "(apt-get install python3-torch python3-torchvision python3-onnx)"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for spec in "${models[@]}"; do
  echo "== $spec"
  head=() model="${spec%%:*}"
  if [[ "$spec" == *:* ]]; then
    head=(--head "${spec#*:}")
    model="$model-${spec#*:}"
  fi
  /usr/bin/python3 "$src/scripts/export-torchvision.py" "${spec%%:*}" "${head[@]}" --out "$work"
  "$bin/coordinator/ios-coordinator" --model "$work/$model.onnx" --device sim:v100 \
    --db "$work/sim.db" --out "$work/$model.schedule.json" -q
  "$bin/run/ios-run" --model "$work/$model.onnx" --schedule "$work/$model.schedule.json" \
    --input "$work/$model.in.bin" --expect "$work/$model.out.bin" \
    --device cpu,threads=1 --no-predict --runs 1 --warmup 0 | tee "$work/run.txt"
  grep -q "^expect: PASSED" "$work/run.txt"
done
echo "all matched PyTorch"
