#!/usr/bin/env bash
# Failure detection across nodes, measured on real processes: the time from
# kill -9 of a member node until the head logs that it went away, and from
# SIGSTOP of a member node until the head evicts it, against the configured
# [launch] evict_after_s (docs/BENCHMARKS.md).
#   bench/failure_times.sh [runs]      (after building: build/tools/rlx)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
rlx=$PWD/build/tools/rlx
heartbeat=0.5
evict=3.0
now() { date +%s.%N; }

# Waits (polling 20 ms: a benchmark, not a test) until FILE contains TEXT; prints the time.
wait_for() {
  local file=$1 text=$2 limit=$3 start
  start=$(now)
  until grep -qF "$text" "$file" 2> /dev/null; do
    if awk -v a="$(now)" -v b="$start" -v l="$limit" 'BEGIN { exit !(a - b > l) }'; then
      echo "failure_times: '$text' not seen within $limit s" >&2
      return 1
    fi
    sleep 0.02
  done
  now
}

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
  awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }'
}

for how in kill stop; do
  times=()
  for ((i = 0; i < runs; i++)); do times+=("$(one_run "$how")"); done
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  if [[ $how == kill ]]; then
    echo "kill -9 of a member node -> head logs 'went away': median ${median} s (runs: ${times[*]})"
  else
    echo "SIGSTOP of a member node -> evicted: median ${median} s (runs: ${times[*]}); heartbeat_s $heartbeat, evict_after_s $evict"
  fi
done
