#!/usr/bin/env bash
# Every torchvision classification model through the ONNX path: export its
# structure (no weights: fast and small), import it and search an IOS
# schedule on the simulated V100. One line per model: the operator and block
# counts, the simulated IOS latency and the search's time, or the importer's
# one-line refusal. The importer's promise (docs/onnx.md) is that every model
# does one or the other: a crash, a hang or a multi-line error is a bug. A
# model PyTorch's own exporter cannot export is listed as "export" and does
# not count against the importer.
#
# With --match, each scheduled model is exported again with (random, seeded)
# weights and run by ios-run under its IOS schedule on the cpu (oneDNN), its
# output checked against PyTorch's (--expect: within 1e-3 of the largest
# |output|); the line gains "match" and the largest difference over the
# largest |output|, or "MISMATCH". Exports with weights are big (VGG: 0.5 GB,
# the largest RegNet and ViT: 2.5 GB, as external data) and runs on the cpu
# slow for them.
#
# Usage: scripts/torchvision-sweep.sh [--match] [MODEL...]   (default: all of them)
# Environment: BUILD_DIR (default build), OUT_DIR (exports and the DB; default
# a fresh temporary directory), TIMEOUT_S per model (default 900).
# Needs Debian's python3-torch, python3-torchvision and python3-onnx.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
OUT_DIR="${OUT_DIR:-$(mktemp -d)}"
TIMEOUT_S="${TIMEOUT_S:-900}"
PYTHON=/usr/bin/python3
COORDINATOR="$BUILD_DIR/coordinator/ios-coordinator"
RUN="$BUILD_DIR/run/ios-run"
match=0
if [[ "${1:-}" == --match ]]; then
  match=1
  shift
fi

[[ -x "$COORDINATOR" ]] || { echo "error: $COORDINATOR not built (bash scripts/dev.sh test)" >&2; exit 2; }
"$PYTHON" -c 'import torch, torchvision, onnx' 2>/dev/null ||
  { echo "error: $PYTHON lacks torch, torchvision or onnx (apt-get install python3-torchvision python3-onnx)" >&2; exit 2; }

if (($# > 0)); then
  models=("$@")
else
  mapfile -t models < <("$PYTHON" -c \
    'import torchvision.models as m; print("\n".join(sorted(m.list_models(module=m))))')
fi

echo "# torchvision $("$PYTHON" -c 'import torchvision; print(torchvision.__version__)'), ${#models[@]} models, exports in $OUT_DIR"
printf '%-20s %-8s %s\n' model result detail
imported=0 refused=0 broken=0 unexportable=0 matched=0 mismatched=0

# match MODEL SCHEDULE: " match 3.1e-06" (the largest difference over the
# largest |output|) or " MISMATCH ..." from ios-run's expect line.
match() {
  # A directory of its own: an export over protobuf's 2 GiB (vit_h_14,
  # regnet_y_128gf) writes its weights as external data files beside it.
  local model="$1" schedule="$2" dir="$OUT_DIR/weights/$1" line
  rm -rf "$dir"
  mkdir -p "$dir"
  if ! "$PYTHON" "$ROOT/scripts/export-torchvision.py" "$model" --out "$dir" >/dev/null 2>&1; then
    echo " MISMATCH (export with weights failed)"
    return 1
  fi
  line=$(timeout "$TIMEOUT_S" "$RUN" --model "$dir/$model.onnx" --schedule "$schedule" \
    --input "$dir/$model.in.bin" --expect "$dir/$model.out.bin" --device cpu --no-predict \
    --runs 1 --warmup 0 2>&1 | grep -m1 '^expect: \|error')
  rm -rf "$dir"
  if [[ "$line" == "expect: PASSED"* ]]; then
    # "expect: PASSED (max |difference| D scheduled, S sequential; largest |reference| R; ..."
    awk '{gsub(/[;,(]/, " "); print " match " sprintf("%.1e", $5 / $11)}' <<<"$line"
    return 0
  fi
  echo " MISMATCH ${line:-(ios-run printed no expect line)}"
  return 1
}

for model in "${models[@]}"; do
  onnx="$OUT_DIR/$model.onnx"
  if ! export_log=$("$PYTHON" "$ROOT/scripts/export-torchvision.py" "$model" --structure-only \
      --out "$OUT_DIR" 2>&1); then
    # PyTorch's own exporter failed: nothing of ours ran.
    printf '%-20s %-8s %s\n' "$model" export "$(tail -n 1 <<<"$export_log")"
    unexportable=$((unexportable + 1))
    continue
  fi
  start=$(date +%s.%N)
  log=$(timeout "$TIMEOUT_S" "$COORDINATOR" --model "$onnx" --device sim:v100 \
    --db "$OUT_DIR/sweep.db" --no-baselines -q --out "$OUT_DIR/$model.schedule.json" 2>&1)
  status=$?
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  if ((status == 0)); then
    summary=$(grep -m1 '^model ' <<<"$log" | sed 's/;.*//')
    latency=$(awk '$1 == "ios" {print $2, $3; exit}' <<<"$log")
    checked=""
    if ((match)); then
      if checked=$(match "$model" "$OUT_DIR/$model.schedule.json"); then
        matched=$((matched + 1))
      else
        mismatched=$((mismatched + 1))
      fi
    fi
    printf '%-20s %-8s %s; IOS %s (simulated); %.1f s;%s\n' "$model" ok "${summary#model * }" \
      "$latency" "$seconds" "$checked"
    imported=$((imported + 1))
  elif ((status == 1)) && (($(grep -c '^ios-coordinator: error: ' <<<"$log") == 1)); then
    printf '%-20s %-8s %s\n' "$model" refused \
      "$(grep -m1 '^ios-coordinator: error: ' <<<"$log" | sed "s|^ios-coordinator: error: $OUT_DIR/||")"
    refused=$((refused + 1))
  else
    printf '%-20s %-8s exit %d: %s\n' "$model" BROKEN "$status" "$(tail -n 1 <<<"$log")"
    broken=$((broken + 1))
  fi
done
echo "# $imported scheduled, $refused refused in one line, $broken broken;" \
  "$unexportable not exportable by this PyTorch"
((match)) && echo "# of the scheduled: $matched match PyTorch, $mismatched do not"
((broken == 0 && mismatched == 0))
