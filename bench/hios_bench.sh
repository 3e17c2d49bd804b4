#!/usr/bin/env bash
# Issue 23's speed goal in one run: our HIOS-LP/MR (bench/hios_bench) and the
# reference's Python (bench/hios_ref_time.py) on the same fixture instances,
# one after the other on the same machine, and the ratio of their mean times.
#
#   HIOS_REF=/path/to/HIOS bash bench/hios_bench.sh [N]
#
# N: how many of the 78 instances the reference completed (default 10; all
# 78 take the reference ~10-15 min). HIOS_REF: a checkout of SHUs-Lab/HIOS
# (its simulation/ folder is imported at run time; nothing of it is in this
# repository). Needs a Release build in build/ and networkx for /usr/bin/python3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-10}
DIR="$ROOT/build/fixtures/hios-sim/hios-instances"
[[ -d "$DIR" ]] || { echo "hios_bench.sh: no fixtures in $DIR (configure the build with ../shared present)" >&2; exit 2; }
[[ -x "$ROOT/build/bench/hios_bench" ]] || { echo "hios_bench.sh: build bench/hios_bench first (cmake --build build --target hios_bench)" >&2; exit 2; }
: "${HIOS_REF:?set HIOS_REF to a checkout of SHUs-Lab/HIOS}"
mapfile -t instances < <(ls "$DIR"/*.json | sort | head -n "$N")
echo "# $(date -u +%FT%TZ) on $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg); ${#instances[@]} instances"
ours=$("$ROOT/build/bench/hios_bench" --repeat 5 "${instances[@]}")
echo "$ours"
ref=$(/usr/bin/python3 "$ROOT/bench/hios_ref_time.py" --ref "$HIOS_REF" "${instances[@]}")
echo "$ref"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$ours" "$ref" <<'PY'
import re, sys
ours, ref = sys.argv[1], sys.argv[2]
def ours_s(name):
    m = re.search(r"^  " + name + r" .* ([0-9.]+) +[0-9]+$", ours, re.M)
    return float(m.group(1))
m = re.search(r"^mean instances=(\d+) lp_s=([0-9.]+) mr_s=([0-9.]+)", ref, re.M)
if not m:
    sys.exit("hios_bench.sh: the reference printed no mean line")
n, ref_lp, ref_mr = int(m.group(1)), float(m.group(2)), float(m.group(3))
lp, mr = ours_s("HIOS-LP"), ours_s("HIOS-MR")
print(f"same run, {n} instances: HIOS-LP reference {ref_lp:.3f} s vs ours {lp:.5f} s = {ref_lp / lp:.0f}x; "
      f"HIOS-MR reference {ref_mr:.3f} s vs ours {mr:.5f} s = {ref_mr / mr:.0f}x")
PY
