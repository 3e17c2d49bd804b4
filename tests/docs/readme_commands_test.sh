#!/usr/bin/env bash
# Runs every command of the README's "Using it" block, as written, in a fresh
# directory where build/ is this build and tests/ the source tree's tests:
# a command the README shows must work. Usage: readme_commands_test.sh SRC BIN
set -euo pipefail
src="$1" bin="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ln -s "$bin" "$work/build"
ln -s "$src/tests" "$work/tests"
cd "$work"

# The block between "## Using it" and the next heading; commands are the
# lines indented by exactly four spaces that start with build/.
mapfile -t commands < <(awk '/^## Using it/{on=1; next} /^## /{on=0} on' "$src/README.md" |
  grep -E '^    build/' | sed -E 's/^    //; s/[[:space:]]+#.*$//')
if ((${#commands[@]} < 5)); then
  echo "found only ${#commands[@]} commands in README.md's 'Using it' block" >&2
  exit 1
fi
failed=0
for command in "${commands[@]}"; do
  echo "+ $command"
  # On one core: the cpu device then uses one thread (its default is the
  # cores it may run on), and ctest's other job does not oversubscribe it.
  if ! timeout 300 taskset -c 0 bash -c "$command" >"$work/out.txt" 2>&1; then
    echo "FAILED: $command" >&2
    tail -20 "$work/out.txt" >&2
    failed=1
  fi
done
exit "$failed"
