#!/usr/bin/env bash
# Makes docs/report.md's screenshots from real runs of the tools: a squeezenet
# search on the simulated V100 (timeline, graph, compare, search views), the
# same over two simulated V100s (multi), an ios-run on this CPU, and the
# specialization matrix when this build's --specialize writes a report.
# Builds nothing: run `cmake --build build --target ios-coordinator ios-run`
# first. Usage: scripts/report-screenshots.sh [BUILD_DIR]  (default: build)
# Writes docs/images/report-*.png; the runs' files stay in a temp folder it names.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
CHROMIUM="${IOS_CHROMIUM:-/usr/bin/chromium}"
coordinator="$BUILD/coordinator/ios-coordinator" run="$BUILD/run/ios-run"
for tool in "$coordinator" "$run" "$CHROMIUM"; do
  [[ -x "$tool" ]] || { echo "report-screenshots: $tool not found or not executable" >&2; exit 2; }
done
work="$(mktemp -d)"
images="$ROOT/docs/images"
mkdir -p "$images"
echo "report-screenshots: runs in $work" >&2

# Its own DB, so the pictures show a search that measured (not one that
# found everything stored by an earlier run).
db="$work/ios-farm.db"
"$coordinator" --model squeezenet --device sim:v100 --db "$db" --out "$work/squeezenet.json" \
  --report "$work/search.html" >"$work/search.txt"
"$coordinator" --model squeezenet --devices sim:v100x2 --force-devices --db "$db" \
  --out "$work/squeezenet.multi.json" --report "$work/multi.html" >"$work/multi.txt"
"$run" --model "$ROOT/tests/data/tiny_model.json" --schedule greedy --runs 3 --db "$work/cpu.db" \
  --report "$work/run.html" >"$work/run.txt"
matrix=""
if "$coordinator" --model squeezenet --specialize --batch 1,8 --device sim:v100 --device sim:k80 \
  --db "$db" --report "$work/matrix.html" >"$work/matrix.txt" 2>"$work/matrix.err" &&
  [[ -s "$work/matrix.html" ]]; then
  matrix="$work/matrix.html"
else
  # Builds before the matrix's HTML view accept --report there and ignore it.
  echo "report-screenshots: no matrix picture: this build's --specialize wrote no report" \
    "(its stderr: $work/matrix.err)" >&2
fi

# shot PAGE VIEW NAME [HEIGHT]: one fresh profile per launch (Chromium keeps
# state in it); the page's script shows the view named in the fragment.
shot() {
  local profile
  profile="$(mktemp -d)"
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --hide-scrollbars --user-data-dir="$profile" --window-size="1400,${4:-900}" \
    --screenshot="$images/report-$3.png" "file://$1#view=$2" >/dev/null 2>&1
  rm -rf "$profile"
  echo "$images/report-$3.png ($(stat -c %s "$images/report-$3.png") bytes)"
}
shot "$work/search.html" timeline timeline 520
shot "$work/search.html" graph graph
shot "$work/search.html" compare compare 400
shot "$work/search.html" search search 760
shot "$work/multi.html" multi multi 520
shot "$work/run.html" timeline run 440
[[ -z "$matrix" ]] || shot "$matrix" matrix matrix 600
