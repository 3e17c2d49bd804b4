#!/usr/bin/env bash
# Issue 25's render goals for the HTML report: the 2,000-operator report
# (tests/report/sample_inputs.h, written by report_sample) under 5 MB, and
# opened and drawn in headless Chromium in under 2 s. Per page: its size; the
# median over RUNS launches of `chromium --dump-dom` minus the median for an
# empty page (Chromium's start-up and shut-down taken out: what is left is
# parse + script + style + layout of our page); and the median of the page's
# own render_ms (performance.now() when its script has drawn everything,
# from navigation start); the same difference in CPU time beside. Launches
# alternate page and empty page so a change in the machine's load hits both. Also NASNet's search report (sim:v100, its
# own DB) when ios-coordinator has --report. Prints a markdown table with
# the load average (1, 5, 15 min) after each page; results go to
# docs/benchmarks.md by hand.
#   cmake --build build --target report_sample ios-coordinator && bash bench/report_render.sh
# Environment: BIN (build directory, default build), CHROMIUM (default
# chromium), RUNS (default 5), OUT (directory for the pages, default a new
# /tmp/report_render.XXXXXX, kept).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
CHROMIUM="${CHROMIUM:-chromium}"
RUNS="${RUNS:-5}"
OUT="${OUT:-$(mktemp -d /tmp/report_render.XXXXXX)}"
mkdir -p "$OUT"

"$BIN/tests/report/report_sample" "$OUT" >/dev/null
echo '<!DOCTYPE html><html><head><title>empty</title></head><body></body></html>' >"$OUT/empty.html"
pages=("2,000-op random layered DAG (report_sample)|$OUT/large.html")

COORDINATOR="$BIN/coordinator/ios-coordinator"
if [[ -x "$COORDINATOR" ]] && "$COORDINATOR" --help 2>&1 | grep -q -- '--report'; then
  "$COORDINATOR" --model nasnet --device sim:v100 --db "$OUT/nasnet.db" -q \
    --out "$OUT/nasnet.json" --report "$OUT/nasnet.html" >"$OUT/nasnet.log" 2>&1
  pages+=("NASNet search, sim:v100 (ios-coordinator --report)|$OUT/nasnet.html")
else
  echo "report_render: $COORDINATOR has no --report: NASNet left out" >&2
fi

# One launch: prints its wall seconds and the CPU seconds (user + sys) of
# Chromium and every process it reaped (bash's `times`, second line). CPU
# time is printed beside wall time because this machine is shared: with
# others' builds running, wall time grows with the load and CPU time barely.
launch() {
  local url="$1" dom="$2" profile
  profile=$(mktemp -d)
  (
    start=$(date +%s.%N)
    timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
      --no-first-run --disable-extensions --disable-background-networking \
      --disable-component-update --host-resolver-rules='MAP * ~NOTFOUND' \
      --window-size=1400,900 --user-data-dir="$profile" --dump-dom "$url" >"$dom" 2>/dev/null ||
      { echo "report_render: chromium failed on $url" >&2; exit 1; }
    end=$(date +%s.%N)
    # Into a file: `times` in a pipeline would run in a fork with no children.
    times >"$dom.times"
    awk -v a="$start" -v b="$end" '
      function s(x, p) { sub(/s$/, "", x); split(x, p, "m"); return p[1] * 60 + p[2] }
      NR == 2 { printf "%.3f %.3f\n", b - a, s($1) + s($2) }' "$dom.times"
  )
  rm -rf "$profile"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "| report | size | wall: page / empty / difference (s) | CPU: page / empty / difference (s) | render_ms | load average |"
echo "|---|---|---|---|---|---|"
for entry in "${pages[@]}"; do
  name="${entry%%|*}"
  page="${entry#*|}"
  page_wall=() page_cpu=() empty_wall=() empty_cpu=() render=()
  for ((run = 0; run < RUNS; ++run)); do
    read -r wall cpu <<<"$(launch "file://$page" "$OUT/page.dom.html")"
    page_wall+=("$wall") page_cpu+=("$cpu")
    read -r wall cpu <<<"$(launch "file://$OUT/empty.html" "$OUT/empty.dom.html")"
    empty_wall+=("$wall") empty_cpu+=("$cpu")
    ms=$(grep -o '"render_ms":[0-9.]*' "$OUT/page.dom.html" | cut -d: -f2 || true)
    if [[ -z "$ms" ]] || ! grep -q '"rendered":true' "$OUT/page.dom.html"; then
      echo "report_render: $page did not render (no self-test with rendered: true)" >&2
      exit 1
    fi
    render+=("$ms")
  done
  pw=$(printf '%s\n' "${page_wall[@]}" | median)
  ew=$(printf '%s\n' "${empty_wall[@]}" | median)
  pc=$(printf '%s\n' "${page_cpu[@]}" | median)
  ec=$(printf '%s\n' "${empty_cpu[@]}" | median)
  r=$(printf '%s\n' "${render[@]}" | median)
  bytes=$(stat -c %s "$page")
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  awk -v n="$name" -v b="$bytes" -v pw="$pw" -v ew="$ew" -v pc="$pc" -v ec="$ec" -v r="$r" -v l="$load" \
    'BEGIN { printf "| %s | %.2f MB | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.0f | %s |\n",
             n, b / 1e6, pw, ew, pw - ew, pc, ec, pc - ec, r, l }'
done
echo "pages and DOM dumps in $OUT" >&2
