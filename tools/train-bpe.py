#!/usr/bin/env python3
"""Trains a byte-level BPE tokenizer.json (the Hugging Face kind that the
Qwen3, Llama 3 and GPT-2 families use; docs/hf-models.md) on a text file:
a small vocabulary for the small Qwen3-MoE models `rlx init-model --hf`
makes (examples/hf-moe.toml), in the same format as the real tokenizers
(Qwen's pre-tokenizer regex, ByteLevel, merges, NFC, the chat template's
special tokens), so RLX's reader, inference engines and the tokenizers
library all load it. Standard library only; deterministic (ties broken by
the pair's bytes).

  tools/train-bpe.py CORPUS OUT [VOCAB]     (VOCAB default 1024)

The pre-tokenizer split used while training is Python's approximation of
the file's regex (ASCII letters and digits for \\p{L} and \\p{N}); the file
keeps the real regex, which encoding applies.
"""
import collections
import json
import re
import sys
import unicodedata

QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
TRAIN_PATTERN = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\w]?[^\W\d_]+|\d| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+|_+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_chars():
    """GPT-2's map from bytes to printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    corpus, out = sys.argv[1], sys.argv[2]
    vocab_size = int(sys.argv[3]) if len(sys.argv) == 4 else 1024
    if vocab_size < 256 + len(SPECIALS) + 1:
        sys.exit("train-bpe: VOCAB must leave room for the 256 bytes and the specials")
    text = unicodedata.normalize("NFC", open(corpus, encoding="utf-8").read())
    bc = byte_chars()
    words = collections.Counter()
    for piece in TRAIN_PATTERN.findall(text):
        words[tuple(bc[b] for b in piece.encode("utf-8"))] += 1
    vocab = {bc[b]: i for i, b in enumerate(sorted(bc, key=lambda b: bc[b]))}
    merges = []
    target = vocab_size - len(SPECIALS)
    seqs = [(list(w), c) for w, c in words.items()]
    while len(vocab) < target:
        pairs = collections.Counter()
        for s, c in seqs:
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], tuple(-ord(ch) for ch in kv[0][0] + "\0" + kv[0][1])))[0]
        joined = best[0] + best[1]
        merges.append(f"{best[0]} {best[1]}")
        vocab[joined] = len(vocab)
        for s, _ in seqs:
            i = 0
            while i < len(s) - 1:
                if s[i] == best[0] and s[i + 1] == best[1]:
                    s[i:i + 2] = [joined]
                i += 1
        if len(merges) % 100 == 0:
            print(f"train-bpe: {len(merges)} merges", file=sys.stderr)
    added = []
    for name in SPECIALS:
        added.append({"id": len(vocab), "content": name, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
        vocab[name] = len(vocab)
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {k: v for k, v in vocab.items() if k not in SPECIALS}, "merges": merges},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"train-bpe: {out}: {len(vocab)} tokens ({len(merges)} merges) from {len(text)} characters", file=sys.stderr)


if __name__ == "__main__":
    main()
