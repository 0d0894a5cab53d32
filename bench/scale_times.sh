#!/usr/bin/env bash
# Elastic membership, measured on real processes (docs/BENCHMARKS.md):
#  1. from `rlx scale` (the command started) until the head logs the new
#     explorer's first segment reaching the learner: on a one-node run
#     (the explorer starts in the head's process) and on a split run (it
#     starts on a member node, which already holds the weights);
#  2. from `rlx node --join` (the process started) until its explorers'
#     first segment reaches the learner (process start, gate, weights over
#     the bulk channel included);
#  3. env steps/s over a one-node run whose explorers go 1 -> 4 -> 2.
#   bench/scale_times.sh [runs] [phase_seconds]   (after building: build/tools/rlx)
set -euo pipefail
source "$(dirname "$0")/common.sh"
runs=${1:-3}
phase=${2:-20}


# A copy of TOML for a run in DIR that only SIGTERM (or max_seconds) ends.
config_in() {
  local toml=$1 dir=$2 seconds=$3
  sed -e "s|^log_dir = .*|log_dir = \"$dir\"|" -e 's|mean_return = [0-9.]*|mean_return = 100000.0|' \
    -e 's|max_env_steps = [0-9_]*|max_env_steps = 500_000_000|' -e "s|max_seconds = [0-9.]*|max_seconds = $seconds|" \
    "$toml" > "$dir/run.toml"
}

secret_of() { echo "--secret-file $1/cluster.secret"; }

# 1: one scale-up; $1 = one-node | split. Prints seconds.
scale_up() {
  local kind=$1 dir pid t0 t1 want
  dir=$(mktemp -d /tmp/rlx-scale-XXXX)
  if [[ $kind == one-node ]]; then
    config_in cluster.toml "$dir" 120.0
    sed -i 's|^\[log\]|[launch]\nlisten = true\n\n&|' "$dir/run.toml"
    want=3
  else
    config_in examples/cartpole-split.toml "$dir" 120.0
    want=3
  fi
  "$rlx" launch "$dir/run.toml" > "$dir/out.txt" 2>&1 &
  pid=$!
  wait_for "$dir/metrics.jsonl" '"explorers":2' 60 > /dev/null
  t0=$(now)
  "$rlx" scale --head "$(cat "$dir/head.addr")" $(secret_of "$dir") --explorers $want > /dev/null
  t1=$(wait_for "$dir/out.txt" "first segment reached the learner" 30)
  kill -TERM "$pid"
  wait "$pid" || true
  # The head's own figure: from the request reaching the coordinator (no `rlx scale` start-up).
  inside=$(grep -m1 "first segment reached the learner" "$dir/out.txt" | sed 's/.*learner \([0-9.]*\) s after.*/\1/')
  rm -rf "$dir"
  echo "$(elapsed "$t1" "$t0")/$inside"
}

# 2: one join of a 1-explorer node to the split run. Prints seconds.
join_node() {
  local dir pid node t0 t1
  dir=$(mktemp -d /tmp/rlx-join-XXXX)
  config_in examples/cartpole-split.toml "$dir" 120.0
  "$rlx" launch "$dir/run.toml" > "$dir/out.txt" 2>&1 &
  pid=$!
  wait_for "$dir/metrics.jsonl" '"explorers":2' 60 > /dev/null
  t0=$(now)
  "$rlx" node --join "$(cat "$dir/head.addr")" $(secret_of "$dir") --name extra --explorers 1 > "$dir/extra.txt" 2>&1 &
  node=$!
  t1=$(wait_for "$dir/out.txt" "first segment reached the learner" 30)
  kill -TERM "$pid"
  wait "$pid" || true
  wait "$node" || true
  rm -rf "$dir"
  elapsed "$t1" "$t0"
}

for kind in one-node split; do
  times=() inside=()
  for ((i = 0; i < runs; i++)); do
    r=$(scale_up $kind)
    times+=("${r%/*}") inside+=("${r#*/}")
  done
  echo "rlx scale 2 -> 3 explorers ($kind) -> the new explorer's first segment at the learner: median $(median "${times[@]}") s" \
    "(runs: ${times[*]}); from the request reaching the head: median $(median "${inside[@]}") s"
done
times=()
for ((i = 0; i < runs; i++)); do times+=("$(join_node)"); done
echo "rlx node --join (1 explorer) started -> its first segment at the learner: median $(median "${times[@]}") s (runs: ${times[*]})"

# 3: env steps/s as explorers go 1 -> 4 -> 2 (each phase $phase s; the
# first 3 s after each change are left out of its mean).
dir=$(mktemp -d /tmp/rlx-steps-XXXX)
config_in cluster.toml "$dir" $((3 * phase + 30)).0
sed -i -e 's|^\[log\]|[launch]\nlisten = true\n\n&|' -e 's|^explorers = 2|explorers = 1|' "$dir/run.toml"
"$rlx" launch "$dir/run.toml" > "$dir/out.txt" 2>&1 &
pid=$!
wait_for "$dir/metrics.jsonl" '"explorers":1' 60 > /dev/null
start=$(now)
marks=("0")
for n in 4 2; do
  sleep "$phase"
  marks+=("$(elapsed "$(now)" "$start")")
  "$rlx" scale --head "$(cat "$dir/head.addr")" $(secret_of "$dir") --explorers $n > /dev/null
done
sleep "$phase"
marks+=("$(elapsed "$(now)" "$start")")
kill -TERM "$pid"
wait "$pid" || true
# time_s in metrics.jsonl counts from the run's start, the phases from $start: the
# first line seen with 1 explorer was written (within 20 ms) at $start.
run_start_offset=$(grep -m1 '"explorers":1' "$dir/metrics.jsonl" | sed 's/.*"time_s":\([0-9.e+-]*\).*/\1/')
names=("1 explorer" "4 explorers" "2 explorers")
for p in 0 1 2; do
  from=$(awk -v a="${marks[$p]}" -v o="$run_start_offset" 'BEGIN{print a + o + 3}')
  to=$(awk -v a="${marks[$((p + 1))]}" -v o="$run_start_offset" 'BEGIN{print a + o}')
  awk -v from="$from" -v to="$to" -v name="${names[$p]}" '
    { t = $0; sub(/.*"time_s":/, "", t); sub(/,.*/, "", t); s = $0; sub(/.*"env_steps":/, "", s); sub(/,.*/, "", s);
      if (t + 0 >= from && t + 0 <= to) { if (!n++) { t0 = t; s0 = s } t1 = t; s1 = s } }
    END { if (n > 1) printf "env steps/s with %s: %.0f (%.0f s measured)\n", name, (s1 - s0) / (t1 - t0), t1 - t0 }' \
    "$dir/metrics.jsonl"
done
rm -rf "$dir"
