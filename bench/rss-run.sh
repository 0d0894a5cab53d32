#!/usr/bin/env bash
# bench/rss-run.sh CONFIG [VAR=VALUE ...]: runs `rlx launch CONFIG` (with
# the environment variables given, e.g. LD_PRELOAD=... or
# MALLOC_MMAP_THRESHOLD_=131072) and prints, every 15 s, the process's
# resident memory, its age and the policy version its log_dir reached:
# how docs/results/token-policy.md "Resident memory of a code run" was measured.
set -euo pipefail
config=${1:?usage: bench/rss-run.sh CONFIG [VAR=VALUE ...]}
shift
rlx=${RLX:-$(dirname "$0")/../build/tools/rlx}
log_dir=$(sed -n 's/^log_dir *= *"\(.*\)"/\1/p' "$config" | head -1)
env "$@" "$rlx" launch "$config" > "${log_dir%/}.log" 2>&1 &
pid=$!
echo "# rss_mb age_s version   (run output: ${log_dir%/}.log)"
while kill -0 "$pid" 2>/dev/null; do
  version=$(tail -1 "$log_dir/metrics.jsonl" 2>/dev/null | grep -o '"policy_version":[0-9]*' | cut -d: -f2 || true)
  ps -o rss=,etimes= -p "$pid" | awk -v v="${version:-0}" '{ printf "%d %d %s\n", $1 / 1024, $2, v }' || true
  sleep 15
done
wait "$pid"
