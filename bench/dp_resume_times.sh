#!/usr/bin/env bash
# How long a data-parallel learner (2 ranks) takes to resume: a CartPole
# run of the embedded cluster.toml with [learner] ranks = 2 stops on its
# step budget, then `rlx launch --resume` rebuilds the learner, from the
# newest checkpoint plus the log after it (checkpoint_every = 25), or by
# replaying the whole log through the ranks (checkpoint_every = 0). The
# figure is the rebuild time the resumed head reports ("resumed at ...
# in S s"), median of the runs (docs/BENCHMARKS.md).
#   bench/dp_resume_times.sh [runs] [env steps before the stop]   (after building: build/tools/rlx)
set -euo pipefail
source "$(dirname "$0")/common.sh"
runs=${1:-3}
steps=${2:-600000}

one_run() {  # $1: checkpoint_every; prints: rebuild seconds, updates replayed, versions identical
  local dir every=$1 line
  dir=$(mktemp -d /tmp/rlx-dp-resume-XXXX)
  sed -e "s|^log_dir = .*|log_dir = \"$dir\"|" -e "s|max_env_steps = [0-9_]*|max_env_steps = $steps|" \
    -e 's|max_seconds = [0-9.]*|max_seconds = 0.0|' -e 's|mean_return = [0-9.]*|mean_return = 100000.0|' \
    -e 's|^ranks = 1|ranks = 2|' -e 's|^batch_segments = 4|batch_segments = 2|' \
    -e "s|^threads = 1|threads = 1\ncheckpoint_every = $every|" cluster.toml > "$dir/run.toml"
  "$rlx" launch "$dir/run.toml" > "$dir/first.txt" 2>&1 || [[ $? == 3 ]]
  sed -i "s|max_env_steps = $steps|max_env_steps = $((steps + 8192))|" "$dir/run.toml"
  "$rlx" launch "$dir/run.toml" --resume > "$dir/resume.txt" 2>&1 || [[ $? == 3 ]]
  line=$(grep -o "resumed at policy v[0-9]* after [0-9]* entries ([0-9]* env steps) in [0-9.]* s" "$dir/resume.txt")
  local from_ckpt=full
  grep -q "resuming from checkpoint" "$dir/resume.txt" && from_ckpt=$(grep -o "resuming from checkpoint [^ ]* (v[0-9]*)" "$dir/resume.txt" | grep -o "v[0-9][0-9]*")
  "$rlx" replay "$dir" > "$dir/replay.txt" 2>&1
  echo "$(echo "$line" | grep -o "in [0-9.]* s" | grep -o "[0-9.]*") $from_ckpt $(echo "$line" | grep -o "v[0-9][0-9]*") $(grep -o "[0-9]* recorded, [0-9]* identical" "$dir/replay.txt" | tr -d ,)"
  rm -rf "$dir"
}

for every in 25 0; do
  times=()
  for ((i = 0; i < runs; i++)); do
    r=$(one_run "$every")
    echo "checkpoint_every=$every: rebuild ${r}" >&2
    times+=("${r%% *}")
  done
  echo "checkpoint_every=$every: median rebuild $(median "${times[@]}") s over $runs runs"
done
