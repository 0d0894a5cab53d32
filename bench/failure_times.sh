#!/usr/bin/env bash
# Failure detection across nodes, measured on real processes: the time from
# kill -9 of a member node until the head logs that it went away, and from
# SIGSTOP of a member node until the head evicts it, against the configured
# [launch] evict_after_s (docs/BENCHMARKS.md).
#   bench/failure_times.sh [runs]      (after building: build/tools/rlx)
set -euo pipefail
source "$(dirname "$0")/common.sh"
runs=${1:-3}
heartbeat=0.5
evict=3.0

one_run() {  # $1 = kill or stop; prints seconds from the signal to the head noticing
  local how=$1 dir pid node t0 t1
  dir=$(mktemp -d /tmp/rlx-failure-XXXX)
  sed -e "s|^log_dir = .*|log_dir = \"$dir\"|" -e 's|max_env_steps = [0-9_]*|max_env_steps = 50_000_000|' \
    -e 's|max_seconds = [0-9.]*|max_seconds = 120.0|' examples/cartpole-split.toml > "$dir/split.toml"
  # The example's [launch] table, with this benchmark's heartbeat and eviction times.
  sed -i "s|^join_timeout_s = .*|&\nheartbeat_s = $heartbeat\nevict_after_s = $evict|" "$dir/split.toml"
  "$rlx" launch "$dir/split.toml" > "$dir/out.txt" 2>&1 &
  pid=$!
  wait_for "$dir/out.txt" "node 'rollout-b' joined the cluster" 60 > /dev/null
  wait_for "$dir/out.txt" "bulk channel: node 'rollout-b' connected" 60 > /dev/null
  node=$(pgrep -f "[r]lx node --config $dir/split.toml --node rollout-b")
  t0=$(now)
  if [[ $how == kill ]]; then
    kill -KILL "$node"
    t1=$(wait_for "$dir/out.txt" "node 'rollout-b' went away" 30)
  else
    kill -STOP "$node"
    t1=$(wait_for "$dir/out.txt" "node 'rollout-b' has not answered" 30)
    kill -CONT "$node"
  fi
  kill -TERM "$pid"
  wait "$pid" || true
  rm -rf "$dir"
  elapsed "$t1" "$t0"
}

for how in kill stop; do
  times=()
  for ((i = 0; i < runs; i++)); do times+=("$(one_run "$how")"); done
  median=$(median "${times[@]}")
  if [[ $how == kill ]]; then
    echo "kill -9 of a member node -> head logs 'went away': median ${median} s (runs: ${times[*]})"
  else
    echo "SIGSTOP of a member node -> evicted: median ${median} s (runs: ${times[*]}); heartbeat_s $heartbeat, evict_after_s $evict"
  fi
done
