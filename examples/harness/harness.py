#!/usr/bin/env python3
"""An agent harness that trains a policy through the RLX gateway.

Standard library only. It reads <log_dir>/gateway.json (where the run's
gateway listens and its bearer token), then plays sessions until the run
ends: each session is an episode of a small multi-turn task, run by this
harness (its own tool loop, its own reward), over the OpenAI-style API:

  POST /rlx/v1/sessions                  open an episode (task id, group id)
  POST /v1/completions                   each turn, token ids in and out
  POST /rlx/v1/sessions/{id}/reward      close it with the harness's reward
  POST /rlx/v1/tokenize                  the tool output's token ids

Token in, token out: every turn sends back the exact token ids the gateway
returned (prompt_token_ids + token_ids) followed by the tool output, so
what the learner trains on is exactly what was sampled (docs/gateway.md).

The task ("letters"): the user asks for a word made only of one letter;
after the first answer the tool says how many characters were right and
asks again; the reward is the share of that letter in the last answer.
A fresh policy writes noise; one that learns writes the letter.

  python3 examples/harness/harness.py --gateway runs/harness/gateway.json
"""
import argparse
import json
import random
import sys
import time
import urllib.error
import urllib.request


class GatewayClosed(Exception):
    """The run ended: the gateway refuses or is gone."""


class Gateway:
    def __init__(self, about_path, timeout_s=120.0):
        with open(about_path) as f:
            about = json.load(f)
        self.url = about["url"]
        self.token = about["token"]
        self.group_size = int(about.get("group_size", 1))
        self.timeout_s = timeout_s

    def post(self, path, body):
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            if e.code in (503, 504):
                raise GatewayClosed(f"HTTP {e.code}: {detail}")
            raise RuntimeError(f"{path}: HTTP {e.code}: {detail}")
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            raise GatewayClosed(str(e))

    def tokenize(self, text):
        return self.post("/rlx/v1/tokenize", {"text": text})["token_ids"]


def play(gw, task_id, group_id, letter, turns, max_tokens):
    """One episode: returns its reward."""
    session = gw.post("/rlx/v1/sessions", {"task_id": task_id, "group_id": group_id,
                                           "metadata": {"letter": letter}})["session_id"]
    prompt = f"<|user|>\nwrite {letter}{letter}{letter}\n<|assistant|>\n"
    ids = None
    answer = ""
    for turn in range(turns):
        body = {"max_tokens": max_tokens, "rlx_session": session, "stop": ["\n"]}
        if ids is None:
            body["prompt"] = prompt
        else:
            body["prompt_token_ids"] = ids
        out = gw.post("/v1/completions", body)
        choice = out["choices"][0]
        answer = choice["text"]
        ids = out["prompt_token_ids"] + choice["token_ids"]
        if turn + 1 < turns:
            right = sum(1 for c in answer if c == letter)
            tool = f"\n<|tool|>\n{right} of {len(answer)} right\n<|assistant|>\n"
            ids = ids + gw.tokenize(tool)  # the tool's output, tokenized by the gateway
    reward = sum(1 for c in answer if c == letter) / max(1, len(answer))
    gw.post(f"/rlx/v1/sessions/{session}/reward", {"reward": reward})
    return reward


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gateway", required=True, help="the run's gateway.json")
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--letters", default="a", help="letters the tasks ask for")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report-every", type=int, default=32, help="sessions between progress lines")
    p.add_argument("--log", help="write each session's reward here (one per line)")
    a = p.parse_args()

    gw = Gateway(a.gateway)
    rng = random.Random(a.seed)
    log = open(a.log, "w") if a.log else None
    done, recent, start = 0, [], time.time()
    group = 0
    try:
        while True:
            letter = rng.choice(a.letters)
            for member in range(gw.group_size):
                r = play(gw, f"letters-{letter}", f"g{group}", letter, a.turns, a.max_tokens)
                done += 1
                recent.append(r)
                if log:
                    print(f"{r:.4f}", file=log, flush=True)
                if done % a.report_every == 0:
                    print(f"{done} sessions, mean reward of the last {len(recent)}: "
                          f"{sum(recent) / len(recent):.3f} ({time.time() - start:.0f} s)", flush=True)
                    recent = []
            group += 1
    except GatewayClosed as e:
        print(f"the gateway closed after {done} sessions ({e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
