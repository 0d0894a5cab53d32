#!/usr/bin/env bash
# A head restart with member nodes that outlive it, on real processes: the
# head of examples/cartpole-split.toml (a process of its own, as on a
# cluster where nodes are started by ssh or Slurm) is killed with -9 and
# restarted with --resume; its two member nodes wait and rejoin. Measured
# from the kill: the restarted head listening (process start + rebuilding
# the learner from checkpoint and log), every node rejoined, and the first
# segment of a rejoined explorer at the new learner (docs/BENCHMARKS.md).
#   bench/head_restart_times.sh [runs] [updates before the kill]   (after building: build/tools/rlx)
set -euo pipefail
source "$(dirname "$0")/common.sh"
runs=${1:-3}
updates=${2:-30}
export RLX_CLUSTER_SECRET=bench-head-restart-secret-0123456789

one_run() {  # prints: listening rejoined first-segment (seconds after the kill)
  local dir head port a b t0 t_listen t_rejoin t_first
  dir=$(mktemp -d /tmp/rlx-restart-XXXX)
  sed -e "s|^log_dir = .*|log_dir = \"$dir\"|" -e 's|max_env_steps = [0-9_]*|max_env_steps = 50_000_000|' \
    -e 's|max_seconds = [0-9.]*|max_seconds = 300.0|' -e 's|mean_return = [0-9.]*|mean_return = 100000.0|' \
    examples/cartpole-split.toml > "$dir/split.toml"
  sed -i "s|^join_timeout_s = .*|&\nreconnect_s = 120|" "$dir/split.toml"
  "$rlx" node --config "$dir/split.toml" --node head > "$dir/head.txt" 2>&1 &
  head=$!
  wait_for "$dir/head.txt" "head listening on" 60 > /dev/null
  port=$(grep -o "head listening on 127.0.0.1:[0-9]*" "$dir/head.txt" | grep -o "[0-9]*$")
  "$rlx" node --config "$dir/split.toml" --node rollout-a --head "127.0.0.1:$port" > "$dir/a.txt" 2>&1 &
  a=$!
  "$rlx" node --config "$dir/split.toml" --node rollout-b --head "127.0.0.1:$port" > "$dir/b.txt" 2>&1 &
  b=$!
  # Some training first: the nodes hold weights and segments of the first head.
  until [[ $(grep -o '"updates":[0-9]*' "$dir/metrics.jsonl" 2> /dev/null | tail -1 | cut -d: -f2) -ge $updates ]]; do
    sleep 0.05
  done
  kill -KILL "$head"
  t0=$(now)
  wait "$head" 2> /dev/null || true
  "$rlx" node --config "$dir/split.toml" --node head --resume > "$dir/head2.txt" 2>&1 &
  head=$!
  t_listen=$(wait_for "$dir/head2.txt" "head listening on 127.0.0.1:$port" 60)
  t_rejoin=$(wait_for "$dir/head2.txt" "rejoined from node" 60 2)
  t_first=$(wait_for "$dir/head2.txt" "s after it rejoined" 60)
  kill -TERM "$head"
  wait "$head" || true
  wait "$a" "$b" || true
  rm -rf "$dir"
  echo "$(elapsed "$t_listen" "$t0") $(elapsed "$t_rejoin" "$t0") $(elapsed "$t_first" "$t0")"
}

listen=() rejoin=() first=()
for ((i = 0; i < runs; i++)); do
  read -r l r f < <(one_run)
  listen+=("$l") rejoin+=("$r") first+=("$f")
done
echo "head kill -9 -> restarted head listening: median $(median "${listen[@]}") s (runs: ${listen[*]})"
echo "head kill -9 -> both member nodes' explorers rejoined: median $(median "${rejoin[@]}") s (runs: ${rejoin[*]})"
echo "head kill -9 -> first segment of a rejoined explorer at the new learner: median $(median "${first[@]}") s (runs: ${first[*]})"
