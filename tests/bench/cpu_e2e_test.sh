#!/usr/bin/env bash
# bench/cpu_e2e.sh against fake programs that answer in the formats of
# ios-coordinator, ios-db, ios-run --format json and bench/pytorch_peer.py:
# each program gets the options the benchmark promises (same device and
# thread count on both sides, the same number of runs), and the tables show
# each row with its prediction error and the IOS speed-up over it; a failed
# run is a row saying so, not an abort. Usage: cpu_e2e_test.sh SRC
set -euo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"

cat >"$work/bin/ios-coordinator" <<'FAKE'
#!/usr/bin/env bash
echo "ios-coordinator $*" >>"$ARGS_LOG"
out=""
while (($#)); do [[ $1 == --out ]] && out=$2; shift; done
[[ "$out" == *inception_v3* ]] && { echo "search failed" >&2; exit 1; }
echo '{"stages": []}' >"$out"
if [[ "$out" == *resnet50* ]]; then  # an ONNX import: its log line and block table
  echo "[info] /x/resnet50.onnx: imported in 0.125 s (70 operators, 106 rewrites)" >&2
  printf 'block  part    n   d    states  transitions  schedules  stages\n'
  printf '    0     0   12   2        29          139   6.91e+10      80\n'
  printf '    1     0    7   3         9           40    1.9e+03      21\n'
  printf '    1     1    5   1         4           10    1.9e+01       6\n'
fi
FAKE
cat >"$work/bin/export" <<'FAKE'
#!/usr/bin/env bash
echo "export $*" >>"$ARGS_LOG"
touch "$4/$1.onnx"
FAKE
cat >"$work/bin/ios-db" <<'FAKE'
#!/usr/bin/env bash
echo '[{"stages_measured": 1, "stages_reused": 0, "enumerate_s": 0.0, "measure_s": 0.1},
       {"stages_measured": 158, "stages_reused": 3, "enumerate_s": 0.01, "measure_s": 12.5}]'
FAKE
cat >"$work/bin/ios-run" <<'FAKE'
#!/usr/bin/env bash
echo "ios-run $*" >>"$ARGS_LOG"
while (($#)); do [[ $1 == --schedule ]] && schedule=$2; shift; done
case "$schedule" in
  sequential) median=15 ;;
  greedy) echo "greedy broke" >&2; exit 1 ;;
  *) median=10 ;;
esac
cat <<JSON
{
  "batch": 1, "device": "cpu:fake", "model": "squeezenet", "schedule": "$schedule",
  "measured_ms": {"max": 12.0, "median": $median, "min": 8.0, "runs": 5, "spread": 1.0},
  "predicted_ms": 9.5, "peak_activation_bytes": 1000000
}
JSON
FAKE
cat >"$work/bin/peer" <<'FAKE'
#!/usr/bin/env bash
echo "peer $*" >>"$ARGS_LOG"
model=$2
for mode in eager:30 jit_frozen:20; do
  echo "{\"peer\": \"pytorch\", \"model\": \"$model\", \"batch\": 1, \"threads\": 2,
    \"mode\": \"${mode%:*}\", \"measured_ms\": {\"min\": 1, \"median\": ${mode#*:}, \"max\": 40},
    \"torch\": \"1.13.0a0\"}" | tr -d '\n'
  echo
done
FAKE
chmod +x "$work/bin/"*

export ARGS_LOG="$work/args.log"
COORDINATOR="$work/bin/ios-coordinator" IOS_DB="$work/bin/ios-db" IOS_RUN="$work/bin/ios-run" \
  PEER="$work/bin/peer" EXPORT="$work/bin/export" OUT="$work/out" RUNS=5 THREADS=2 \
  bash "$src/bench/cpu_e2e.sh" "squeezenet inception_v3 torchvision:resnet50" 1 \
  >"$work/table.md" 2>"$work/err.txt"
cat "$work/table.md"

failed=0
expect() {  # expect FILE TEXT: FILE has a line containing TEXT
  if ! grep -qF -- "$2" "$1"; then
    echo "FAILED: no line with '$2' in $(basename "$1")" >&2
    failed=1
  fi
}
t="$work/table.md" a="$work/args.log"
expect "$t" "| squeezenet | 1 | "
expect "$t" " | 158 | 3 | 12.5 s |"
expect "$t" "| inception_v3 | 1 | | | | | failed | | | |"
# An ONNX export: imported, its blocks and parts summed up, the peer is the
# torchvision model.
expect "$a" "export resnet50 --out $work/out"
expect "$a" "ios-coordinator --model $work/out/resnet50.onnx --batch 1"
expect "$a" "ios-run --model $work/out/resnet50.onnx --schedule $work/out/resnet50-b1.json"
expect "$a" "peer --model torchvision:resnet50 --batch 1"
expect "$t" "| torchvision:resnet50 | 1 | 0.12 s | 2 / 3 | 12 / 3 | 42 / 189 | "
expect "$t" "| torchvision:resnet50 | 1 | PyTorch 1.13.0a0 jit frozen | 1.00 | 20.00 | 40.00 |  |  |  | 2.00x |"
expect "$t" "| squeezenet | 1 | ios-run sequential | 8.00 | 15.00 | 12.00 | 9.50 | -36.7% | 1.0 MB | 1.50x |"
expect "$t" "| squeezenet | 1 | ios-run greedy | failed |"
expect "$t" "| squeezenet | 1 | ios-run IOS | 8.00 | 10.00 | 12.00 | 9.50 | -5.0% | 1.0 MB | 1.00x |"
expect "$t" "| squeezenet | 1 | PyTorch 1.13.0a0 eager | 1.00 | 30.00 | 40.00 |  |  |  | 3.00x |"
expect "$t" "| squeezenet | 1 | PyTorch 1.13.0a0 jit frozen | 1.00 | 20.00 | 40.00 |  |  |  | 2.00x |"
expect "$a" "ios-coordinator --model squeezenet --batch 1 --device cpu,threads=2 --db $work/out/cpu.db --out $work/out/squeezenet-b1.json"
expect "$a" "ios-run --model squeezenet --schedule $work/out/squeezenet-b1.json --device cpu,threads=2 --batch 1 --db $work/out/cpu.db --runs 5 --format json"
expect "$a" "ios-run --model squeezenet --schedule sequential --device cpu,threads=2"
expect "$a" "peer --model squeezenet --batch 1 --threads 2 --runs 5"
# No IOS schedule to compare with: no speed-up.
expect "$t" "| inception_v3 | 1 | PyTorch 1.13.0a0 eager | 1.00 | 30.00 | 40.00 |  |  |  |  |"
# The failed search leaves the baselines to run, and no schedule file to run.
expect "$a" "ios-run --model inception_v3 --schedule greedy"
if grep -q -- "--schedule $work/out/inception_v3-b1.json" "$a"; then
  echo "FAILED: ios-run ran the schedule of a failed search" >&2
  failed=1
fi
expect "$work/err.txt" "inception_v3-b1: search failed"
exit "$failed"
