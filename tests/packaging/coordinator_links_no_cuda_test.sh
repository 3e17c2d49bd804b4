#!/usr/bin/env bash
# The coordinator (and ios-db) must start on machines without CUDA: neither
# names a CUDA or cuDNN library among the libraries it needs, directly or
# through another (ldd resolves the whole closure).
#   coordinator_links_no_cuda_test.sh BUILD_DIR
set -euo pipefail
BUILD="${1:?usage: coordinator_links_no_cuda_test.sh BUILD_DIR}"
for tool in coordinator/ios-coordinator db/ios-db; do
  linked="$(ldd "$BUILD/$tool" | awk '{ print $1 }' | grep -E '^lib(cuda|cudart|cudnn|nvidia)' || true)"
  if [[ -n "$linked" ]]; then
    echo "FAIL: $tool links $(echo "$linked" | tr '\n' ' ')" >&2
    exit 1
  fi
done
# ...while ios-worker does, when this build has the cuda backend. (ldd's
# output is read whole: grep -q closing the pipe early would fail it.)
worker_libs="$(ldd "$BUILD/worker/ios-worker")"
if grep -q libcudart <<<"$worker_libs"; then
  grep -q libcudnn <<<"$worker_libs" || { echo "FAIL: ios-worker lacks cuDNN" >&2; exit 1; }
  echo "PASS: ios-coordinator and ios-db link no CUDA; ios-worker links the CUDA runtime and cuDNN"
else
  echo "PASS: ios-coordinator and ios-db link no CUDA (this build has no cuda backend)"
fi
