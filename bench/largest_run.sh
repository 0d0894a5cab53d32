#!/usr/bin/env bash
# bench/largest_run.sh [DIR]: the largest policies an RL run trains on this
# machine (docs/hf-models.md "The largest model on one machine"). Each row
# makes a checkpoint of a field model's shape with `rlx init-model` (random
# weights, bf16) and runs examples/hf-moe.toml in one process (explorer,
# evaluator, reward workers, learner) for UPDATES PPO updates of 8 rows x 8
# new tokens: peak resident memory (/usr/bin/time) and bytes a parameter,
# decode tokens/s, the learner's seconds an update, versions an hour of the
# run's wall time (start-up included). ROWS picks rows by name (default all:
# about 45 minutes on 2 cores); DIR keeps the checkpoints for a rerun.
set -euo pipefail
source "$(dirname "$0")/common.sh"
dir=${1:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/.." && pwd)
updates=${UPDATES:-3}
tok="$root/examples/hf-moe-tokenizer.json"
# Shapes: Qwen3-4B's and Qwen3-0.6B's (vocabulary 151,936, tied), a
# Qwen3-MoE of 4.2 B (12 layers of 64 experts, top 8) and one of 0.64 B;
# the two small ones with the tokenizer's 32,000 ids too (a 151,936 x
# 1,024 embedding is 622 MB in fp32, over the 512 MiB one tensor of a
# weight set carries: those runs stop at their first publish, saying so).
q06="--family qwen3 --d-model 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --mlp-hidden 3072"
m06="--family qwen3_moe --d-model 1024 --layers 6 --heads 16 --kv-heads 4 --head-dim 128 --experts 32 --top-k 4 --expert-hidden 768"
declare -A shapes=(
  [qwen3-4b]="--family qwen3 --d-model 2560 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 --mlp-hidden 9728 --vocab 151936"
  [qwen3-0.6b]="$q06 --vocab 151936"
  [qwen3-0.6b-32k]="$q06 --vocab 32000"
  [moe-4b]="--family qwen3_moe --d-model 2048 --layers 12 --heads 32 --kv-heads 4 --head-dim 128 --experts 64 --top-k 8 --expert-hidden 768 --vocab 151936"
  [moe-0.6b]="$m06 --vocab 151936"
  [moe-0.6b-32k]="$m06 --vocab 32000"
)
# A row: name shape mode (lora | bf16 | f32: full fine-tuning, weights at rest in that dtype).
all_rows="qwen3-0.6b-bf16:qwen3-0.6b:bf16 qwen3-0.6b-f32:qwen3-0.6b:f32 qwen3-0.6b-32k-f32:qwen3-0.6b-32k:f32
  moe-0.6b-bf16:moe-0.6b:bf16 moe-0.6b-32k-f32:moe-0.6b-32k:f32 qwen3-4b-lora:qwen3-4b:lora moe-4b-lora:moe-4b:lora"
sed -e "s|^log_dir = .*|log_dir = \"$dir/log\"|" -e 's|^envs_per_explorer = 64|envs_per_explorer = 8|' \
  -e "s|^tokenizer = \"hf-moe-tokenizer.json\"|tokenizer = \"$tok\"|" "$root/examples/hf-moe.toml" > "$dir/run.toml"
lora='{ rank = 16, alpha = 32, targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "experts"] }'
echo "# row parameters peak_KiB bytes_a_parameter updates decode_tok_s learner_s_an_update versions_an_hour wall_s [how it ended]"
for row in $all_rows; do
  IFS=: read -r name shape mode <<< "$row"
  [[ -z ${ROWS:-} || " $ROWS " == *" $name "* ]] || continue
  # shellcheck disable=SC2086 # a shape is its flags
  [[ -d "$dir/$shape" ]] || "$rlx" init-model --hf "$dir/$shape" ${shapes[$shape]} --tie --dtype bf16 \
    --shard-mb 2000 --tokenizer "$tok" > "$dir/$shape.made"
  params=$(grep -o '[0-9.]*M parameters' "$dir/$shape.made" | cut -dM -f1)
  params=$(awk -v m="$params" 'BEGIN { printf "%.0f", m * 1e6 }')
  extra=(--set "policy.dtype=\"${mode/lora/bf16}\"")
  # A LoRA config names only the targets the family has (a dense model has no experts, an MoE no dense MLP).
  [[ $mode == lora && $shape == qwen3-* ]] && extra+=(--set "policy.lora=${lora/, \"experts\"/}")
  [[ $mode == lora && $shape == moe-* ]] && extra+=(--set "policy.lora=${lora/\"gate_proj\", \"up_proj\", \"down_proj\", /}")
  rm -rf "$dir/log"
  /usr/bin/time -o "$dir/time" -f "%M" "$rlx" launch "$dir/run.toml" --set "policy.init=\"hf:$dir/$shape\"" \
    --set weight_store.keep_versions=1 --set run.max_staleness=1 --set tokens.max_new_tokens=8 \
    --set tokens.group_size=4 --set tokens.eval_tasks=2 --set tokens.eval_every=2 --set run.stop.max_updates="$updates" \
    --set 'learner.algorithm="ppo"' "${extra[@]}" > "$dir/$name.out" 2>&1 || status=$?
  why=$(grep -m1 -o 'cannot be published: .*' "$dir/$name.out" || tail -1 "$dir/$name.out")
  # A run that ended otherwise than by its stop (3) says how in a last column.
  ended=$( ((${status:-3} == 3)) || grep -o 'FAILED to end: .*)' "$dir/$name.out" || echo "exit ${status}")
  unset status
  python3 - "$name" "$params" "$(tail -1 "$dir/time")" "$dir/log/metrics.jsonl" "$ended" "$why" <<'PY'
import json, os, sys
name, params, peak, path, ended = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
m = [json.loads(l) for l in open(path)][-1] if os.path.exists(path) else {"updates": 0}
if m["updates"] == 0:  # it never trained: the row says why
    sys.exit(print(name, "%.0f" % params, "failed:", sys.argv[6]))
print(name, "%.0f" % params, peak, "%.2f" % (peak * 1024 / params), m["updates"],
      "%.2f" % (m["policy_tokens"] / m["decode_s"]), "%.1f" % (m["learner_busy_s"] / m["updates"]),
      "%.0f" % (3600 * m["updates"] / m["time_s"]), "%.0f" % m["time_s"], ended)
PY
done
[[ $# -ge 1 ]] || rm -rf "$dir"
