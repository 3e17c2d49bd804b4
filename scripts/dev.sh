#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root, or with sudo):
#   bash scripts/dev.sh run    install what is missing, build, run the main job
#   bash scripts/dev.sh test   install what is missing, check formatting, build, run the
#                              test suite, then again under ASan + UBSan
#   bash scripts/dev.sh tsan   the farm's tests under ThreadSanitizer (not in CI)
# BUILD_DIR (default: build), SANITIZE_BUILD_DIR (default: build-asan) and
# JOBS (default: all cores) may be set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
SANITIZE_BUILD_DIR="${SANITIZE_BUILD_DIR:-$ROOT/build-asan}"
JOBS="${JOBS:-$(nproc)}"

PACKAGES=(
  g++ cmake ninja-build pkg-config
  libsqlite3-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev
  libdnnl-dev ocl-icd-opencl-dev
  libonnx-dev libprotobuf-dev
  clang-format
  # The sanitized build of `test` (clang builds it in half GCC's time);
  # the ASan runtime and llvm-symbolizer are only recommended by clang.
  clang libclang-rt-14-dev llvm-14
)
# Only `test` needs these: the report's browser test (tests/report/
# report_browser_test.cc) opens each kind of report in headless Chromium.
TEST_PACKAGES=(chromium)

# install_missing [EXTRA_PACKAGE...]: PACKAGES and the extra ones.
install_missing() {
  local missing=()
  for pkg in "${PACKAGES[@]}" "$@"; do
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

# One configuration for `run` and `test` (warnings are errors in both), so
# either reuses what the other built. `run` builds only the tools it runs
# (ios-worker too: the coordinator starts one for --device cuda); `test`
# builds everything.
# -O2, not CMake's Release -O3: GCC 12 compiles our libraries in about four
# fifths of the time (coordinator/multi_schedule.cc: 13 s against 17 s), and
# CI's 30 minutes are nearly spent (docs/benchmarks.md "CI time").
build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIOS_WERROR=ON \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS" ${1:+--target "$@"}
}

# Every C++ source must match .clang-format; lists the files that do not.
# One clang-format per 40 files, JOBS at once: one process per file took a
# minute of CI's 30 (docs/benchmarks.md "CI time").
check_format() {
  local out status=0 bad
  out=$(cd "$ROOT" && find common coordinator db devices exec hios memory net onnx report run schema worker tests bench \
    \( -name '*.cc' -o -name '*.h' \) -print0 | sort -z |
    xargs -0 -n 40 -P "$JOBS" clang-format --dry-run --Werror 2>&1 >/dev/null) || status=$?
  bad=$(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
  if [[ -n $bad ]]; then
    echo "ios-farm: these files differ from .clang-format (fix: clang-format -i FILE):" >&2
    sed 's/^/  /' <<<"$bad" >&2
    return 1
  fi
  if ((status != 0)); then
    echo "ios-farm: clang-format failed: $out" >&2
    return 1
  fi
}

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer:
# the fuzz and chaos tests only fail on a crash unless memory errors crash too.
# Without the real CUDA layer (IOS_CUDA=OFF): the Release build compiles it,
# nvcc cannot take the sanitizer flags, and the cuda device's logic, which
# is what runs here, is built and tested either way (against the fake).
test_sanitized() {
  # Built with clang: 4.4 minutes on the 2-core VM where GCC takes 9
  # (docs/benchmarks.md "CI time"). A directory an older dev.sh configured
  # with GCC is started afresh, since CMake cannot switch compilers in place.
  local cache="$SANITIZE_BUILD_DIR/CMakeCache.txt"
  if [[ -f "$cache" ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$cache"; then
    rm -rf "$SANITIZE_BUILD_DIR"
  fi
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$SANITIZE_BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIOS_SANITIZE=address,undefined -DIOS_BUILD_BENCH=OFF \
    -DIOS_WERROR=ON -DIOS_CUDA=OFF >/dev/null
  cmake --build "$SANITIZE_BUILD_DIR" -j "$JOBS"
  local symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
  [[ -x "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$SANITIZE_BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 900
}

# The farm's threads (router, embedded and remote workers, ZAP, monitor)
# under ThreadSanitizer. Not part of `test`: a third build would take the
# CI run (21 min) past its 30-minute budget on 2 cores. Run it after
# touching net/, worker/ or coordinator/farm*.
test_threads() {
  local dir="${TSAN_BUILD_DIR:-$ROOT/build-tsan}"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DIOS_SANITIZE=thread -DIOS_BUILD_BENCH=OFF -DIOS_WERROR=ON >/dev/null
  cmake --build "$dir" -j "$JOBS" --target farm_test net_test
  TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp halt_on_error=1" \
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 600 \
    -R 'Farm[A-Z]|HungMeasurement|Curve|Handshake|Endpoint' -E 'FarmProcess|FarmCli'
}

# The main job: search SqueezeNet on this machine's CPU (oneDNN), then run the
# sequential, greedy and IOS schedules end to end with ios-run, each measured
# beside the DP's prediction. A rerun reuses every measurement in the DB.
main_job() {
  local db="${IOS_DB:-$ROOT/ios-farm.db}" out="${IOS_OUT:-$ROOT/schedule.json}"
  local model="${IOS_MODEL:-squeezenet}" batch="${IOS_BATCH:-1}"
  local report="${IOS_REPORT:-$ROOT/report.html}"
  "$BUILD_DIR/coordinator/ios-coordinator" --model "$model" --batch "$batch" --db "$db" \
    --out "$out" --report "$report" "$@"
  local schedule
  for schedule in sequential greedy "$out"; do
    echo
    "$BUILD_DIR/run/ios-run" --model "$model" --schedule "$schedule" --batch "$batch" \
      --db "$db" --runs 20
  done
  # Last, so it is the line left in view: the page docs/report.md explains.
  echo
  echo "report: file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
}

case "${1:-}" in
  run)
    install_missing
    build ios-coordinator ios-run ios-worker
    shift
    main_job "$@"
    ;;
  test)
    install_missing "${TEST_PACKAGES[@]}"
    check_format
    build
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600
    test_sanitized
    echo "ios-farm: all tests passed (Release and ASan+UBSan builds)"
    ;;
  tsan)
    install_missing
    test_threads
    ;;
  *)
    echo "usage: bash scripts/dev.sh run|test|tsan" >&2
    exit 2
    ;;
esac
