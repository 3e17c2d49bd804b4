#!/usr/bin/env bash
# HIOS on the zoo models over 2 and 4 simulated V100s, NVLink and PCIe
# (issue 23): each row is one ios-coordinator --devices run; the speed-up is
# over the IOS schedule of one simulated V100 from the same run, of HIOS
# after the window and the IOS DP inside devices (+DP). Every figure
# is SIMULATED (the analytical V100 model and the modelled links).
#
#   bash bench/hios_zoo.sh [MODEL...]   (default: the four zoo models)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COORD="$ROOT/build/coordinator/ios-coordinator"
[[ -x "$COORD" ]] || { echo "hios_zoo.sh: build ios-coordinator first" >&2; exit 2; }
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(inception_v3 nasnet randwire squeezenet)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $(date -u +%FT%TZ), SIMULATED V100s (sim:v100), batch 1"
printf "%-13s %4s %-6s %-6s %9s %9s %9s %9s %8s %8s  %s\n" model gpus link mapper "1-GPU ms" \
  "mapped" "window" "+DP" speed-up "sched s" written
for model in "${models[@]}"; do
  for n in 2 4; do
    for link in nvlink pcie; do
      for mapper in lp mr; do
        out=$("$COORD" --model "$model" --devices "sim:v100x$n" --link "$link" --multi-gpu "$mapper" \
          --db "$work/zoo.db" -q --out "$work/m.json")
        line=$(grep -m1 "predicted latency" <<<"$out")
        mapped=$(sed -E 's/.*mapping ([0-9.]+) ms.*/\1/' <<<"$line")
        final=$(sed -E 's/.*after the window ([0-9.]+) ms.*/\1/' <<<"$line")
        one=$(grep -m1 "speed-up over one device" <<<"$out" | sed -E 's/.*, ([0-9.]+) ms\): ([0-9.]+)x.*/\1 \2/')
        sched=$(grep -m1 "scheduling:" <<<"$out" | sed -E 's/.*mapping ([0-9.]+) s, window ([0-9.]+) s.*/\1 \2/' |
          awk '{printf "%.4f", $1 + $2}')
        written=HIOS
        grep -q "written: the one-device schedule" <<<"$out" && written="one device (IOS)"
        dp=$(grep -m1 "inside devices" <<<"$out" | sed -E 's/.*per device ([0-9.]+) ms.*/\1/')
        read -r one_ms speedup <<<"$one"
        printf "%-13s %4d %-6s %-6s %9s %9s %9s %9s %7sx %8s  %s\n" "$model" "$n" "$link" "$mapper" \
          "$one_ms" "$mapped" "$final" "$dp" "$speedup" "$sched" "$written"
      done
    done
  done
done
