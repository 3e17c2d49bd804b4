#!/usr/bin/env bash
# The README's main command after its test command builds nothing: both
# configure build/ alike, and `run` asks only for the tools it runs. Runs
# dev.sh's own build() on this build tree, with `cmake --build` turned into
# a dry run of the same targets.
set -euo pipefail
root="$1" build="$2"
# Only a tree configured as dev.sh configures it: another (Debug, no -Werror)
# would be reconfigured by this test, and rebuilt after it.
cache="$build/CMakeCache.txt"
if ! grep -qx 'CMAKE_BUILD_TYPE:STRING=Release' "$cache" ||
  ! grep -q '^IOS_WERROR:BOOL=ON$' "$cache"; then
  echo "SKIPPED: $build is not configured as scripts/dev.sh configures it (Release, IOS_WERROR=ON)"
  exit 0
fi
eval "$(sed -n '/^build() {/,/^}/p' "$root/scripts/dev.sh")"
ROOT="$root" BUILD_DIR="$build" JOBS=1
targets=$(sed -n 's/^ *build \(ios-.*\)$/\1/p' "$root/scripts/dev.sh")
[[ -n "$targets" ]] || { echo "FAIL: no 'build TARGETS' line in dev.sh's run" >&2; exit 1; }
cmake() {
  if [[ "$1" != --build ]]; then
    command cmake "$@"
    return
  fi
  local wanted=("${@:5}")  # --build DIR -j N --target T...
  [[ "${wanted[0]:-}" == --target ]] || { echo "FAIL: run builds every target" >&2; exit 1; }
  local plan
  plan=$(ninja -C "$BUILD_DIR" -n "${wanted[@]:1}")
  if ! grep -q "no work to do" <<<"$plan"; then
    echo "FAIL: dev.sh run would rebuild after dev.sh test:" >&2
    head -5 <<<"$plan" >&2
    exit 1
  fi
}
# shellcheck disable=SC2086
build $targets
echo "dev.sh run reuses the test build: $targets up to date"
