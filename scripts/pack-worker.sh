#!/usr/bin/env bash
# A tarball of ios-worker and ios-run for GPU hosts of this machine's
# architecture that have no -dev packages: the binaries, the shared libraries
# they need that a bare host lacks (ZeroMQ, libsodium, Cap'n Proto, spdlog,
# fmt, oneDNN, SQLite, ...) and wrappers that point the loader at them.
# Left to the host: the C and C++ runtime (glibc >= this machine's, libstdc++,
# libgcc_s) and the GPU stack (the NVIDIA driver, the CUDA runtime and cuDNN
# of the versions ios-worker was built with; docs/gpu.md).
#   bash scripts/pack-worker.sh [OUT.tar.gz]      (default: ios-worker-ARCH.tar.gz)
# BIN (default build) names the build directory; build it first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/build}"
ARCH="$(uname -m)"
NAME="ios-worker-$ARCH"
OUT="${1:-$ROOT/$NAME.tar.gz}"
TOOLS=("$BIN/worker/ios-worker" "$BIN/run/ios-run")
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
mkdir -p "$STAGE/$NAME/bin" "$STAGE/$NAME/libexec" "$STAGE/$NAME/lib"
for tool in "${TOOLS[@]}"; do
  cp "$tool" "$STAGE/$NAME/libexec/"
  # ldd resolves the whole closure; copy what the host is not expected to have.
  while read -r soname path; do
    host_provided "$soname" && continue
    if [[ "$path" != /* ]]; then
      echo "pack-worker: $(basename "$tool") needs $soname, which this machine cannot find" >&2
      exit 1
    fi
    [[ -e "$STAGE/$NAME/lib/$soname" ]] || cp -L "$path" "$STAGE/$NAME/lib/$soname"
  done < <(ldd "$tool" | awk '$2 == "=>" { print $1, $3 }')
  wrapper="$STAGE/$NAME/bin/$(basename "$tool")"
  cat >"$wrapper" <<EOF
#!/bin/sh
# Runs the packed $(basename "$tool") with the libraries packed beside it.
here="\$(cd "\$(dirname "\$0")/.." && pwd)"
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/libexec/$(basename "$tool")" "\$@"
EOF
  chmod +x "$wrapper"
done

cat >"$STAGE/$NAME/README" <<EOF
ios-worker and ios-run from ios-farm $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "(no git)"),
packed on $(date -u '+%Y-%m-%d') for $ARCH ($(ldd --version | head -n 1)).

  bin/ios-worker --backend cuda --connect tcp://COORDINATOR:5555
  bin/ios-run --model squeezenet --device cuda --check

The host provides: glibc and libstdc++ at least as new as above, the NVIDIA
driver, and the CUDA runtime and cuDNN these were built with:
$(ldd "${TOOLS[0]}" | awk '$1 ~ /^lib(cudart|cudnn)/ { print "  " $1 }')
(on the library path, e.g. /usr/local/cuda/lib64 in /etc/ld.so.conf.d).
EOF

mkdir -p "$(dirname "$OUT")"
tar -C "$STAGE" -czf "$OUT" "$NAME"
echo "pack-worker: wrote $OUT ($(du -h "$OUT" | cut -f1)): $NAME/bin/ios-worker, $NAME/bin/ios-run and" \
  "$(find "$STAGE/$NAME/lib" -type f | wc -l) libraries"
