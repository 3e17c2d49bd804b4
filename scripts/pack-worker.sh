#!/usr/bin/env bash
# A tarball of ios-worker and ios-run for GPU hosts of this machine's
# architecture that have no -dev packages: the binaries, the shared libraries
# they need that a bare host lacks (ZeroMQ, libsodium, Cap'n Proto, spdlog,
# fmt, oneDNN, SQLite, ...) and wrappers that point the loader at them.
# Left to the host: the C and C++ runtime (glibc >= this machine's, libstdc++,
# libgcc_s) and the GPU stack (the NVIDIA driver, the CUDA runtime and cuDNN
# of the versions ios-worker was built with; docs/gpu.md).
#   bash scripts/pack-worker.sh [OUT.tar.gz]      (default: ios-worker-ARCH.tar.gz)
# With --gpu-host, the bundle for a GPU host with nothing of ours (docs/gpu.md,
# "A GPU host bundle"): all four tools, the gpu-labelled tests, bin/gpu-check
# and the PyTorch peer script, xz-compressed; the wrappers find the CUDA
# runtime and cuDNN wherever the host keeps them (Python wheels included).
#   bash scripts/pack-worker.sh --gpu-host [OUT.tar.xz]  (default: ios-gpu-host-ARCH.tar.xz)
# BIN (default build) names the build directory; build it first. MODELS_DIR
# (--gpu-host only) adds its ONNX models with their M.in.bin and M.out.bin,
# which gpu-check runs on the GPU against those outputs.
# XZ_LEVEL (default -6) is the bundle's xz preset: the packaging test uses
# -1 (a fifth of -6's time, about 30% larger), which bounds the size from above.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
ARCH="$(uname -m)"
GPU_HOST=false
if [[ "${1:-}" == --gpu-host ]]; then
  GPU_HOST=true
  shift
fi
TOOLS=("$BIN/worker/ios-worker" "$BIN/run/ios-run")
TESTS=()
if $GPU_HOST; then
  NAME="ios-gpu-host-$ARCH"
  OUT="${1:-$ROOT/$NAME.tar.xz}"
  TOOLS+=("$BIN/coordinator/ios-coordinator" "$BIN/db/ios-db")
  for test in cuda_gpu_test backend_conformance_test; do
    found="$(find "$BIN/tests" -name "$test" -type f -perm -u+x 2>/dev/null | head -n 1)"
    if [[ -z "$found" ]]; then
      echo "pack-worker: --gpu-host needs $test, which $BIN lacks: a build with the cuda backend" \
        "(CMake finds nvcc and cuDNN under /usr/local/cuda; docs/gpu.md) and its tests" >&2
      exit 1
    fi
    TESTS+=("$found")
  done
else
  NAME="ios-worker-$ARCH"
  OUT="${1:-$ROOT/$NAME.tar.gz}"
fi
for tool in "${TOOLS[@]}"; do
  if [[ ! -x "$tool" ]]; then
    echo "pack-worker: $tool is missing; build first (bash scripts/dev.sh run, or cmake --build $BIN)" >&2
    exit 1
  fi
done

# What every host has, or must bring itself: never packed.
host_provided() {
  case "$1" in
    linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
      libresolv.so* | libgcc_s.so* | libstdc++.so* | \
      libcuda.so* | libcudart.so* | libcudnn*.so* | libnvidia-*.so* | libnvrtc*.so* | libcublas*.so*)
      return 0 ;;
  esac
  return 1
}

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
PACK="$STAGE/$NAME"
mkdir -p "$PACK/bin" "$PACK/libexec" "$PACK/lib"

# Copies what `elf` needs that the host is not expected to have into lib/
# (ldd resolves the whole closure).
pack_libraries() {
  local elf="$1" soname path
  while read -r soname path; do
    host_provided "$soname" && continue
    if [[ "$path" != /* ]]; then
      echo "pack-worker: $(basename "$elf") needs $soname, which this machine cannot find" >&2
      exit 1
    fi
    [[ -e "$PACK/lib/$soname" ]] || cp -L "$path" "$PACK/lib/$soname"
  done < <(ldd "$elf" | awk '$2 == "=>" { print $1, $3 }')
}

# A wrapper puts the packed libraries first on the loader's path; in the GPU
# host bundle it then adds wherever the host keeps the CUDA runtime and cuDNN.
find_gpu_libs=""
if $GPU_HOST; then
  cp "$ROOT/scripts/find-gpu-libs.sh" "$PACK/lib/"
  find_gpu_libs='. "$here/lib/find-gpu-libs.sh"'
fi
for tool in "${TOOLS[@]}"; do
  cp "$tool" "$PACK/libexec/"
  pack_libraries "$tool"
  wrapper="$PACK/bin/$(basename "$tool")"
  cat >"$wrapper" <<WRAPPER
#!/bin/sh
# Runs the packed $(basename "$tool") with the libraries packed beside it.
here="\$(cd "\$(dirname "\$0")/.." && pwd)"
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
$find_gpu_libs
export LD_LIBRARY_PATH
exec "\$here/libexec/$(basename "$tool")" "\$@"
WRAPPER
  chmod +x "$wrapper"
done

if $GPU_HOST; then
  mkdir -p "$PACK/libexec/tests" "$PACK/share"
  for test in "${TESTS[@]}"; do
    cp "$test" "$PACK/libexec/tests/"
    pack_libraries "$test"
  done
  cp "$ROOT/scripts/gpu-check.sh" "$PACK/bin/gpu-check"
  chmod +x "$PACK/bin/gpu-check"
  cp "$ROOT/bench/pytorch_peer.py" "$PACK/share/"
  # ONNX models for gpu-check to run against their reference outputs
  # (M.onnx, M.in.bin, M.out.bin), when asked: they can be large.
  if [[ -n "${MODELS_DIR:-}" ]]; then
    mkdir -p "$PACK/share/models"
    cp "$MODELS_DIR"/*.onnx "$MODELS_DIR"/*.in.bin "$MODELS_DIR"/*.out.bin "$PACK/share/models/"
  fi
  # The multi-GPU test's schedule (IOS_TEST_DATA points it here).
  mkdir -p "$PACK/share/testdata"
  cp "$ROOT/tests/data/tiny_model.multi.json" "$PACK/share/testdata/"
  # Debug information is most of a binary's size (the bundle's limit is
  # 30 MB): the packed copies keep their symbols, not their DWARF.
  find "$PACK/libexec" "$PACK/lib" -type f ! -name '*.sh' -exec strip --strip-debug {} +
  cat >"$PACK/README" <<README
ios-farm's GPU host bundle, $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "(no git)"),
packed on $(date -u '+%Y-%m-%d') for $ARCH ($(ldd --version | head -n 1)).

  bin/gpu-check [OUT_DIR]     # gpu tests, checks, searches and the benchmark table (< 5 min)
  bin/ios-coordinator --model squeezenet --device cuda --db gpu.db
  bin/ios-run --model squeezenet --device cuda --cuda-graph --check
  bin/ios-worker --backend cuda --connect tcp://COORDINATOR:5555
  bin/ios-db --db gpu.db stats

The host provides glibc and libstdc++ at least as new as above, the NVIDIA
driver, the CUDA 13 runtime (libcudart.so.13) and cuDNN 9 (libcudnn.so.9):
the wrappers look on LD_LIBRARY_PATH, in the loader's cache, under
/usr/local/cuda*, and in every python3's site-packages (nvidia/*/lib, where
the nvidia-cuda-runtime and nvidia-cudnn wheels put them); gpu-check says
which it used. PYTHON names one more interpreter to search.
README
else
  cat >"$PACK/README" <<README
ios-worker and ios-run from ios-farm $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "(no git)"),
packed on $(date -u '+%Y-%m-%d') for $ARCH ($(ldd --version | head -n 1)).

  bin/ios-worker --backend cuda --connect tcp://COORDINATOR:5555
  bin/ios-run --model squeezenet --device cuda --check

The host provides: glibc and libstdc++ at least as new as above, the NVIDIA
driver, and the CUDA runtime and cuDNN these were built with:
$(ldd "${TOOLS[0]}" | awk '$1 ~ /^lib(cudart|cudnn)/ { print "  " $1 }')
(on the library path, e.g. /usr/local/cuda/lib64 in /etc/ld.so.conf.d).
README
fi

mkdir -p "$(dirname "$OUT")"
if $GPU_HOST; then
  tar -C "$STAGE" -cf - "$NAME" | xz -T0 "${XZ_LEVEL:--6}" >"$OUT"
else
  tar -C "$STAGE" -czf "$OUT" "$NAME"
fi
echo "pack-worker: wrote $OUT ($(du -h "$OUT" | cut -f1)): $(ls "$PACK/bin" | tr '\n' ' ')and" \
  "$(find "$PACK/lib" -type f -name '*.so*' | wc -l) libraries"
