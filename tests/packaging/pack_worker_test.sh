#!/usr/bin/env bash
# scripts/pack-worker.sh makes a tarball that, unpacked into an empty
# directory, needs nothing from the host but the C/C++ runtime and the GPU
# stack (driver, CUDA runtime, cuDNN): every other library any packed binary
# or library names (ELF NEEDED) is packed, the wrappers make the loader use
# the packed copies, and both tools start.
#   pack_worker_test.sh BUILD_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:?usage: pack_worker_test.sh BUILD_DIR}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/packaging/elf_closure.sh
. "$ROOT/tests/packaging/elf_closure.sh"

BIN="$BUILD" bash "$ROOT/scripts/pack-worker.sh" "$WORK/worker.tar.gz" >/dev/null
mkdir "$WORK/empty"
tar -C "$WORK/empty" -xzf "$WORK/worker.tar.gz"
dir="$(find "$WORK/empty" -mindepth 1 -maxdepth 1 -type d)"
[[ -x "$dir/bin/ios-worker" && -x "$dir/bin/ios-run" ]] || fail "bin/ios-worker or bin/ios-run missing"

check_elf_closure "$dir"

# The packed copies are the ones loaded (ZeroMQ is never a host library here).
zmq="$(LD_LIBRARY_PATH="$dir/lib" ldd "$dir/libexec/ios-worker" | awk '$1 == "libzmq.so.5" { print $3 }')"
[[ "$zmq" == "$dir/lib/libzmq.so.5" ]] || fail "libzmq resolved to '$zmq', not the packed copy"

for tool in ios-worker ios-run; do
  env -i PATH=/usr/bin:/bin "$dir/bin/$tool" --help >"$WORK/help" 2>&1 || fail "$tool --help failed: $(cat "$WORK/help")"
  grep -q -- "--connect\|--model" "$WORK/help" || fail "$tool --help printed no usage"
done
echo "PASS: packed $(ls "$dir/lib" | wc -l) libraries; both tools start from an empty directory"
