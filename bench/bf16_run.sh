#!/usr/bin/env bash
# bench/bf16_run.sh [DIR]: one-process PPO runs of a 288 M-parameter
# Qwen3-MoE (bench/hf_load.sh's shape), [policy] dtype f32 against bf16,
# at keep_versions 4 and 1: peak resident memory (/usr/bin/time), decode
# tokens/s (policy_tokens / decode_s), the learner's busy seconds for the
# run's updates, and the largest sampler_mismatch. examples/hf-moe.toml
# with 8 rows of 8 new tokens, 10 updates: docs/results/hf-models.md
# "bf16 at rest". About 8 minutes on 2 cores.
set -euo pipefail
source "$(dirname "$0")/common.sh"
dir=${1:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/.." && pwd)
shape=(--vocab 32000 --d-model 1024 --layers 8 --heads 16 --kv-heads 4 --experts 16 --expert-hidden 512)
for dtype in f32 bf16; do
  [[ -d "$dir/$dtype" ]] || "$rlx" init-model --hf "$dir/$dtype" "${shape[@]}" --dtype "$dtype" \
    --tokenizer "$root/examples/hf-moe-tokenizer.json" > /dev/null
done
sed -e "s|^log_dir = .*|log_dir = \"$dir/log\"|" -e 's|^envs_per_explorer = 64|envs_per_explorer = 8|' \
  -e "s|^tokenizer = \"hf-moe-tokenizer.json\"|tokenizer = \"$root/examples/hf-moe-tokenizer.json\"|" \
  "$root/examples/hf-moe.toml" > "$dir/run.toml"
echo "# dtype keep peak_KB bytes_a_parameter updates decode_tok_s learner_busy_s wall_s sampler_mismatch_max"
for keep in 4 1; do
  for dtype in f32 bf16; do
    rm -rf "$dir/log"
    /usr/bin/time -o "$dir/time" -f "%M" "$rlx" launch "$dir/run.toml" --set "policy.init=\"hf:$dir/$dtype\"" \
      --set "policy.dtype=\"$dtype\"" --set "weight_store.keep_versions=$keep" --set tokens.max_new_tokens=8 \
      --set tokens.group_size=4 --set tokens.eval_tasks=2 --set tokens.eval_every=2 --set run.stop.max_updates=10 \
      --set 'learner.algorithm="ppo"' > "$dir/$dtype-$keep.out" 2>&1 || [[ $? -eq 3 ]]  # 3: a stop condition met
    python3 - "$dtype" "$keep" "$(tail -1 "$dir/time")" "$dir/log/metrics.jsonl" <<'PY'
import json, sys
dtype, keep, peak, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(path)]
m = rows[-1]
print(dtype, keep, peak, "%.1f" % (peak * 1024 / 288.0e6), m["updates"], "%.1f" % (m["policy_tokens"] / m["decode_s"]),
      "%.1f" % m["learner_busy_s"], "%.1f" % m["time_s"], "%.3g" % max(r.get("sampler_mismatch", 0) for r in rows))
PY
  done
done
[[ $# -ge 1 ]] || rm -rf "$dir"
