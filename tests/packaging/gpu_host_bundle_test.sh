#!/usr/bin/env bash
# scripts/pack-worker.sh --gpu-host: the bundle for a GPU host with nothing
# of ours is at most 30 MB, holds the four tools, the gpu-labelled tests,
# gpu-check, the PyTorch peer script and the multi-GPU test's schedule,
# needs nothing from the host but the C/C++ runtime and the GPU stack,
# finds cuDNN in a Python wheel's folder, and its gpu-check says in one
# line, exit 77, that this machine has no GPU.
#   gpu_host_bundle_test.sh BUILD_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:?usage: gpu_host_bundle_test.sh BUILD_DIR}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/packaging/elf_closure.sh
. "$ROOT/tests/packaging/elf_closure.sh"

# xz -1: 10 s instead of 50 s of CI; its bundle is larger than the default
# -6's, so the size bound holds for the real one too.
XZ_LEVEL=-1 BIN="$BUILD" bash "$ROOT/scripts/pack-worker.sh" --gpu-host "$WORK/bundle.tar.xz" >/dev/null
size=$(stat -c %s "$WORK/bundle.tar.xz")
((size <= 30 * 1024 * 1024)) || fail "the bundle is $size bytes, over 30 MB"
mkdir "$WORK/empty"
tar -C "$WORK/empty" -xJf "$WORK/bundle.tar.xz"
dir="$(find "$WORK/empty" -mindepth 1 -maxdepth 1 -type d)"
for file in bin/ios-coordinator bin/ios-worker bin/ios-run bin/ios-db bin/gpu-check \
  libexec/tests/cuda_gpu_test libexec/tests/backend_conformance_test; do
  [[ -x "$dir/$file" ]] || fail "$file missing or not executable"
done
[[ -f "$dir/share/pytorch_peer.py" && -f "$dir/lib/find-gpu-libs.sh" ]] ||
  fail "share/pytorch_peer.py or lib/find-gpu-libs.sh missing"
[[ -f "$dir/share/testdata/tiny_model.multi.json" ]] ||
  fail "share/testdata/tiny_model.multi.json (the multi-GPU test's schedule) missing"
check_elf_closure "$dir"

for tool in ios-coordinator ios-worker ios-run ios-db; do
  env -i PATH=/usr/bin:/bin "$dir/bin/$tool" --help >"$WORK/help" 2>&1 ||
    fail "$tool --help failed: $(cat "$WORK/help")"
done

# A host whose cuDNN is only in a wheel's site-packages folder: found there
# through the Python named by PYTHON.
mkdir -p "$WORK/site/nvidia/cudnn/lib" "$WORK/site/nvidia/cublas/lib"
touch "$WORK/site/nvidia/cudnn/lib/libios_test_cudnn.so.9"
printf '#!/bin/sh\necho %s\n' "$WORK/site" >"$WORK/python"
chmod +x "$WORK/python"
found="$(env -i PATH=/usr/bin:/bin PYTHON="$WORK/python" sh -c \
  ". '$dir/lib/find-gpu-libs.sh'; ios_find_gpu_lib libios_test_cudnn.so.9")" ||
  fail "a library in site-packages/nvidia/*/lib was not found"
[[ "$found" == "$WORK/site/nvidia/cudnn/lib/libios_test_cudnn.so.9" ]] || fail "found '$found'"

if nvidia-smi -L >/dev/null 2>&1; then
  echo "PASS (gpu-check's no-GPU path not tried: this machine has a GPU)"
  exit 0
fi
set +e
env -i PATH=/usr/bin:/bin HOME="$WORK" "$dir/bin/gpu-check" "$WORK/check" >"$WORK/check.out" 2>"$WORK/check.err"
code=$?
set -e
[[ $code -eq 77 ]] || fail "gpu-check without a GPU exited $code, not 77: $(cat "$WORK/check.out" "$WORK/check.err")"
grep -q '^gpu-check: no usable GPU here: .*libcudart.so.13=.*libcudnn.so.9=' "$WORK/check.out" ||
  fail "gpu-check printed no one-line reason: $(cat "$WORK/check.out")"
echo "PASS: $(du -h "$WORK/bundle.tar.xz" | cut -f1) bundle; $(cat "$WORK/check.out")"
