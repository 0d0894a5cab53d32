#!/usr/bin/env bash
# Trains the workspace agent's subword vocabulary (docs/token-policy.md
# "Vocabularies"): the expert's transcripts of training tasks only
# (`rlx corpus`), a SentencePiece BPE on them (Debian's spm_train), and its
# pieces exported as text (spm_export_vocab), which is what RLX reads.
# Deterministic: the same arguments write the same file.
#   tools/train-tokenizer.sh [OUT] [PIECES] [TASKS]
# defaults: examples/agent-bpe1024.vocab 1024 400. Uses build/tools/rlx
# (RLX env var to override). CORPUS=FILE trains on that text instead of a
# new corpus; MODEL=FILE keeps SentencePiece's own model (for spm_encode).
set -euo pipefail
out=${1:-examples/agent-bpe1024.vocab}
pieces=${2:-1024}
tasks=${3:-400}
rlx=${RLX:-build/tools/rlx}
for tool in spm_train spm_export_vocab; do
  command -v "$tool" >/dev/null || { echo "train-tokenizer: $tool missing (bash tools/install-deps.sh installs sentencepiece)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${CORPUS:-}" ]; then cp "$CORPUS" "$work/corpus.txt"
else "$rlx" corpus --tasks "$tasks" --seed 1 --out "$work/corpus.txt"; fi
# Pieces may span spaces (an indented `return` is one piece) but never a
# line: the corpus is a line per sentence and RLX encodes line by line.
# No normalisation, no dummy prefix: a piece's text is exactly its bytes
# (with U+2581 for a space). Bytes as fallback pieces: every text encodes.
# One thread, no sampling, no shuffling: the same corpus gives the same pieces.
spm_train --input="$work/corpus.txt" --model_prefix="$work/spm" --model_type=bpe --vocab_size="$pieces" \
  --normalization_rule_name=identity --remove_extra_whitespaces=false --add_dummy_prefix=false \
  --split_by_whitespace=false --allow_whitespace_only_pieces=true --split_digits=false \
  --character_coverage=1.0 --byte_fallback=true --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 \
  --num_threads=1 --input_sentence_size=0 --shuffle_input_sentence=false --max_sentence_length=16384 \
  --minloglevel=2 >"$work/spm_train.log" 2>&1 || { cat "$work/spm_train.log" >&2; exit 2; }
spm_export_vocab --model="$work/spm.model" >"$work/vocab"
mv "$work/vocab" "$out"
if [ -n "${MODEL:-}" ]; then cp "$work/spm.model" "$MODEL"; fi
echo "train-tokenizer: $out ($(wc -l <"$out") pieces) from $(wc -c <"$work/corpus.txt") bytes of text"
