#!/usr/bin/env bash
# bench/hf_load.sh [DIR]: the load time and resident memory of a Qwen3-MoE
# checkpoint of 1.15 GB (F32; 288M parameters: vocab 32000, d_model 1024,
# 8 layers of 16 experts) and of the same shape in BF16, as a run loads
# one (`rlx check-model`: the model built, each tensor copied in from the
# mapped files and its pages handed back), against reading the same bytes
# raw (cat, from the page cache) in the same run: docs/BENCHMARKS.md
# "Hugging Face checkpoints". Three loads each, the median.
set -euo pipefail
source "$(dirname "$0")/common.sh"
dir=${1:-$(mktemp -d)}
shape=(--vocab 32000 --d-model 1024 --layers 8 --heads 16 --kv-heads 4 --experts 16 --expert-hidden 512)
echo "# dtype file_MB load_s build_s copy_s raw_read_s copy/raw rss_before_MB rss_peak_MB (peak-before)/file peak/file"
for dtype in f32 bf16; do
  "$rlx" init-model --hf "$dir/$dtype" "${shape[@]}" --dtype "$dtype" > /dev/null
  cat "$dir/$dtype"/*.safetensors > /dev/null  # both from the page cache
  raws=() loads=() builds=() peaks=() befores=()
  for _ in 1 2 3; do
    start=$(now)
    cat "$dir/$dtype"/*.safetensors > /dev/null
    raws+=("$(elapsed "$(now)" "$start")")
    line=$("$rlx" check-model --hf "$dir/$dtype" --json)
    loads+=("$(grep -o '"load_s": [0-9.]*' <<< "$line" | cut -d' ' -f2)")
    builds+=("$(grep -o '"build_s": [0-9.]*' <<< "$line" | cut -d' ' -f2)")
    peaks+=("$(grep -o '"rss_peak_bytes": [0-9]*' <<< "$line" | cut -d' ' -f2)")
    befores+=("$(grep -o '"rss_before_bytes": [0-9]*' <<< "$line" | cut -d' ' -f2)")
    bytes=$(grep -o '"file_bytes": [0-9]*' <<< "$line" | cut -d' ' -f2)
  done
  load=$(median "${loads[@]}") build=$(median "${builds[@]}") raw=$(median "${raws[@]}")
  peak=$(median "${peaks[@]}") before=$(median "${befores[@]}")
  awk -v d="$dtype" -v b="$bytes" -v l="$load" -v bu="$build" -v r="$raw" -v p="$peak" -v be="$before" 'BEGIN {
    printf "%s %.0f %.2f %.2f %.2f %.3f %.1f %.0f %.0f %.2f %.2f\n", d, b / 1e6, l, bu, l - bu, r, (l - bu) / r, be / 1e6, p / 1e6,
           (p - be) / b, p / b }'
done
[[ $# -ge 1 ]] || rm -rf "$dir"
