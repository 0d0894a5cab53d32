#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang in build-fuzz/ and runs
# each for a bounded number of inputs (default 20000), starting from one
# valid message per target. Exits non-zero when any target crashes, hangs
# or leaks; the crashing input is kept in build-fuzz/crashes/.
#   tools/fuzz.sh [runs-per-target]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20000}
command -v clang++ > /dev/null || { echo "rlx fuzz: clang++ not found (tools/install-deps.sh installs clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DRLX_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  > build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
ninja -C build-fuzz -j "$(nproc)" > build-fuzz.build.log 2>&1 || { tail -50 build-fuzz.build.log; exit 1; }
rm -rf build-fuzz/corpus && mkdir -p build-fuzz/crashes
build-fuzz/fuzz/rlx_fuzz_seeds build-fuzz/corpus
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=0
for target in build-fuzz/fuzz/fuzz_*; do
  name=${target##*/fuzz_}
  if "$target" -runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -seed=1 \
       -artifact_prefix="build-fuzz/crashes/$name-" "build-fuzz/corpus/$name" > "build-fuzz/$name.log" 2>&1; then
    echo "rlx fuzz: $name: $runs inputs, no crash ($(grep -o 'cov: [0-9]*' "build-fuzz/$name.log" | tail -1))"
  else
    echo "rlx fuzz: $name FAILED (log: build-fuzz/$name.log)" >&2
    tail -30 "build-fuzz/$name.log" >&2
    failed=1
  fi
done
exit $failed
