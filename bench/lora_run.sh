#!/usr/bin/env bash
# bench/lora_run.sh [DIR]: one-process PPO runs of a 288 M-parameter
# Qwen3-MoE (bench/bf16_run.sh's shape and run), full fine-tuning in bf16
# against LoRA over the frozen bf16 base (rank 16 on the attention
# projections, every expert and lm_head), at keep_versions 4 and 1: peak
# resident memory (/usr/bin/time) and bytes a parameter, decode tokens/s,
# the learner's busy seconds, and the bytes a weight version carries (the
# learner's published set: adapters and value head, or every weight).
# docs/results/hf-models.md "LoRA". About 6 minutes on 2 cores
# (KEEPS="1" MODES="lora" bash bench/lora_run.sh: one of the four).
set -euo pipefail
source "$(dirname "$0")/common.sh"
dir=${1:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/.." && pwd)
shape=(--vocab 32000 --d-model 1024 --layers 8 --heads 16 --kv-heads 4 --experts 16 --expert-hidden 512)
[[ -d "$dir/bf16" ]] || "$rlx" init-model --hf "$dir/bf16" "${shape[@]}" --dtype bf16 \
  --tokenizer "$root/examples/hf-moe-tokenizer.json" > /dev/null
sed -e "s|^log_dir = .*|log_dir = \"$dir/log\"|" -e 's|^envs_per_explorer = 64|envs_per_explorer = 8|' \
  -e "s|^tokenizer = \"hf-moe-tokenizer.json\"|tokenizer = \"$root/examples/hf-moe-tokenizer.json\"|" \
  "$root/examples/hf-moe.toml" > "$dir/run.toml"
lora='{ rank = 16, alpha = 32, targets = ["q_proj", "k_proj", "v_proj", "o_proj", "experts", "lm_head"] }'
echo "# mode keep peak_KB bytes_a_parameter updates decode_tok_s learner_busy_s wall_s version_bytes"
for keep in ${KEEPS:-4 1}; do
  for mode in ${MODES:-full lora}; do
    rm -rf "$dir/log"
    extra=()
    [[ $mode == lora ]] && extra=(--set "policy.lora=$lora")
    /usr/bin/time -o "$dir/time" -f "%M" "$rlx" launch "$dir/run.toml" --set "policy.init=\"hf:$dir/bf16\"" \
      --set 'policy.dtype="bf16"' --set "weight_store.keep_versions=$keep" --set tokens.max_new_tokens=8 \
      --set tokens.group_size=4 --set tokens.eval_tasks=2 --set tokens.eval_every=2 --set run.stop.max_updates=10 \
      --set 'learner.algorithm="ppo"' "${extra[@]}" > "$dir/$mode-$keep.out" 2>&1 || [[ $? -eq 3 ]]  # 3: a stop met
    ckpt=$(ls "$dir"/log/checkpoints/ckpt-*.bin | tail -1)
    python3 - "$mode" "$keep" "$(tail -1 "$dir/time")" "$dir/log/metrics.jsonl" "$ckpt" <<'PY'
import json, os, sys
mode, keep, peak, path, ckpt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = [json.loads(l) for l in open(path)]
m = rows[-1]
# A version is the learner's trained parameters in bf16; the checkpoint holds them in fp32 with
# Adam's two moments (12 bytes each), so a sixth of its size is a version's bytes.
version = os.path.getsize(ckpt) / 6
print(mode, keep, peak, "%.1f" % (peak * 1024 / 288.0e6), m["updates"], "%.1f" % (m["policy_tokens"] / m["decode_s"]),
      "%.1f" % m["learner_busy_s"], "%.1f" % m["time_s"], "%.3g" % version)
PY
  done
done
[[ $# -ge 1 ]] || rm -rf "$dir"
