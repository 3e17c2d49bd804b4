#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root, or with sudo):
#   bash scripts/dev.sh run    install what is missing, build, run the main job
#   bash scripts/dev.sh test   install what is missing, build, run the test suite
# BUILD_DIR (default: build) and JOBS (default: all cores) may be set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"

PACKAGES=(
  g++ cmake ninja-build pkg-config
  libsqlite3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev
)

install_missing() {
  local missing=()
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    return
  fi
  echo "ios-farm: installing ${missing[*]}" >&2
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  local werror="$1"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIOS_WERROR="$werror" >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case "${1:-}" in
  run)
    install_missing
    build OFF
    shift
    # The main job: Inception V3 on the simulated V100, baselines beside it.
    # A second run reuses every measurement from ios-farm.db.
    exec "$BUILD_DIR/coordinator/ios-coordinator" --model inception_v3 --device sim:v100 \
      --baselines --db "${IOS_DB:-$ROOT/ios-farm.db}" --out "${IOS_OUT:-$ROOT/schedule.json}" "$@"
    ;;
  test)
    install_missing
    build ON
    cd "$BUILD_DIR"
    exec ctest --output-on-failure -j "$JOBS" --timeout 600
    ;;
  *)
    echo "usage: bash scripts/dev.sh run|test" >&2
    exit 2
    ;;
esac
