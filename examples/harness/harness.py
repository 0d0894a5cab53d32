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

Two task families (--tasks):

  letters    the user asks for a word made only of one letter; after the
             first answer the tool says how many characters were right
             and asks again; the reward is the share of that letter in the
             last answer. A fresh policy writes noise; one that learns
             writes the letter (examples/harness.toml).
  workspace  the coding-agent episodes of docs/workspace.md: a generated
             Python project with function bodies removed; the policy calls
             tools (@read, @replace, @run, @submit, ...) turn by turn; the
             harness runs each call with `rlx workspace-tools` (the
             sandbox the reward uses) and posts the hidden tests' score
             (examples/harness-agent.toml).

  python3 examples/harness/harness.py --gateway runs/harness/gateway.json
  python3 examples/harness/harness.py --gateway runs/harness-agent/gateway.json --tasks workspace --concurrency 8
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request

from workspace_tools import ToolsFailed, WorkspaceTools, find_rlx


class GatewayClosed(Exception):
    """The run ended: the gateway refuses or is gone."""


class Gateway:
    def __init__(self, about_path, timeout_s=120.0, wait_s=0.0):
        # The run writes the file once it listens (atomically): a harness
        # started beside the run may wait for it.
        deadline = time.time() + wait_s
        while not os.path.exists(about_path) and time.time() < deadline:
            time.sleep(0.2)
        with open(about_path) as f:
            about = json.load(f)
        self.url = about["url"]
        self.token = about["token"]
        self.group_size = int(about.get("group_size", 1))
        self.max_len = int(about.get("max_len", 128))
        self.eos = int(about.get("eos_token_id", 1))
        self.timeout_s = timeout_s

    def post(self, path, body):
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"},
            method="POST",
        )
        while True:
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                    return json.load(r)
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")
                if e.code == 503 and e.headers.get("Retry-After"):  # busy: too many turns queued
                    time.sleep(float(e.headers["Retry-After"]))
                    continue
                if e.code in (503, 504):
                    raise GatewayClosed(f"HTTP {e.code}: {detail}")
                raise RuntimeError(f"{path}: HTTP {e.code}: {detail}")
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                raise GatewayClosed(str(e))

    def tokenize(self, text):
        return self.post("/rlx/v1/tokenize", {"text": text})["token_ids"]


def play_letters(gw, task_id, group_id, letter, turns, max_tokens):
    """One episode of the letters task: returns its reward."""
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


def play_workspace(gw, tools, task_id, group_id, turn_tokens):
    """One workspace episode: returns (reward or None on a machinery failure, the tools' last reply)."""
    session = gw.post("/rlx/v1/sessions", {"task_id": task_id, "group_id": group_id})["session_id"]
    try:
        start = tools.ask("start", task=task_id)
        ids = gw.tokenize(start["prompt"])
        while True:
            # A turn: decode line by line until the text holds its tool call
            # (a stop string cannot say "a line that starts with @"), the
            # policy ends its text, or the turn's budget runs out.
            text, used = "", 0
            while True:
                room = min(turn_tokens - used, gw.max_len - len(ids))
                if room <= 0:
                    break
                out = gw.post("/v1/completions", {"prompt_token_ids": ids, "max_tokens": room, "stop": ["\n"],
                                                  "rlx_session": session})
                c = out["choices"][0]
                ids = out["prompt_token_ids"] + c["token_ids"]
                used += len(c["token_ids"])
                # Every sampled piece counts, also any text past the stop string.
                text += "".join(p for p, t in zip(c["logprobs"]["tokens"], c["token_ids"]) if t != gw.eos)
                if gw.eos in c["token_ids"] or c["finish_reason"] == "length":
                    break
                if tools.ask("complete", text=text)["complete"]:
                    break
            turn = tools.ask("turn", text=text)
            if turn["done"]:
                break
            observation = gw.tokenize(turn["observation"])  # context: never trained on
            if len(ids) + len(observation) >= gw.max_len:
                tools.ask("out_of_budget")
                break
            ids = ids + observation
        score = tools.ask("score")
    except ToolsFailed as e:
        gw.post(f"/rlx/v1/sessions/{session}/reward", {"reward": 0.0, "infra_failure": True})
        return None, {"reason": str(e)}
    if score["failure"] != "none":  # the sandbox failed: not a score
        gw.post(f"/rlx/v1/sessions/{session}/reward", {"reward": 0.0, "infra_failure": True})
        return None, score
    gw.post(f"/rlx/v1/sessions/{session}/reward", {"reward": score["reward"]})
    return score["reward"], score


class Tally:
    """Sessions played, across worker threads; progress lines and the log."""

    def __init__(self, report_every, log_path):
        self.lock = threading.Lock()
        self.report_every = report_every
        self.log = open(log_path, "w") if log_path else None
        self.start = time.time()
        self.done, self.failed, self.solved = 0, 0, 0
        self.turns, self.calls, self.bad = 0, 0, 0
        self.recent = []

    def add(self, reward, info):
        with self.lock:
            if reward is None:
                self.failed += 1
                print(f"a session's machinery failed: {info.get('reason')}", flush=True)
                return
            self.done += 1
            self.recent.append(reward)
            self.solved += bool(info.get("solved"))
            self.turns += info.get("turns", 0)
            self.calls += info.get("tool_calls", 0)
            self.bad += info.get("bad_calls", 0)
            if self.log:
                print(f"{reward:.4f}", file=self.log, flush=True)
            if self.done % self.report_every == 0:
                extra = ""
                if "turns" in info:
                    extra = (f", solved {self.solved}, per session {self.turns / self.done:.1f} turns "
                             f"{self.calls / self.done:.1f} tool calls {self.bad / self.done:.1f} bad")
                print(f"{self.done} sessions, mean reward of the last {len(self.recent)}: "
                      f"{sum(self.recent) / len(self.recent):.3f}{extra} ({time.time() - self.start:.0f} s)", flush=True)
                self.recent = []


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gateway", required=True,
                   help="the run's gateway.json (a member node's: gateway-NODE.json, on that node's host)")
    p.add_argument("--wait-s", type=float, default=0, help="wait this long for the file to appear (a run starting)")
    p.add_argument("--tasks", choices=["letters", "workspace"], default="letters")
    p.add_argument("--concurrency", type=int, default=1, help="sessions played at once (one thread each)")
    p.add_argument("--max-sessions", type=int, default=0, help="stop after this many (0: until the gateway closes)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report-every", type=int, default=32, help="sessions between progress lines")
    p.add_argument("--log", help="write each session's reward here (one per line)")
    p.add_argument("--turns", type=int, default=2, help="letters: turns per episode")
    p.add_argument("--max-tokens", type=int, default=8, help="letters: tokens per answer")
    p.add_argument("--letters", default="a", help="letters: the letters the tasks ask for")
    p.add_argument("--rlx", help="workspace: the rlx binary (default: on PATH, else build/tools/rlx)")
    p.add_argument("--split", choices=["train", "held_out"], default="train", help="workspace: the task split")
    p.add_argument("--difficulty", type=int, default=1, help="workspace: bodies removed (1-3; 0: one body of one operation)")
    p.add_argument("--max-turns", type=int, default=8, help="workspace: turns before an episode ends unsubmitted")
    p.add_argument("--turn-tokens", type=int, default=96, help="workspace: tokens one turn may take")
    a = p.parse_args()

    gw = Gateway(a.gateway, wait_s=a.wait_s)
    rng = random.Random(a.seed)
    tally = Tally(a.report_every, a.log)
    lock = threading.Lock()
    groups = [0]
    closed, errors = [], []

    def next_group():
        """A group's task and number, or None once enough sessions were started."""
        with lock:
            if closed or (a.max_sessions and groups[0] * gw.group_size >= a.max_sessions):
                return None
            g = groups[0]
            groups[0] += 1
            if a.tasks == "letters":
                return g, rng.choice(a.letters)
            return g, f"{a.split}:{rng.randrange(1 << 31)}:{a.difficulty}"

    def worker():
        tools = WorkspaceTools(find_rlx(a.rlx), a.max_turns) if a.tasks == "workspace" else None
        try:
            while (job := next_group()) is not None:
                g, task = job
                for _ in range(gw.group_size):
                    if a.tasks == "letters":
                        r = play_letters(gw, f"letters-{task}", f"g{g}", task, a.turns, a.max_tokens)
                        tally.add(r, {})
                    else:
                        tally.add(*play_workspace(gw, tools, task, f"g{g}", a.turn_tokens))
        except GatewayClosed as e:
            with lock:
                closed.append(str(e))
        except Exception as e:  # a bug or a refusal: say it, stop the others, exit 1
            with lock:
                errors.append(repr(e))
                closed.append("this harness failed")
        finally:
            if tools:
                tools.close()

    threads = [threading.Thread(target=worker) for _ in range(max(1, a.concurrency))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"the harness failed after {tally.done} sessions: {errors[0]}", flush=True)
        return 1
    if closed:
        print(f"the gateway closed after {tally.done} sessions ({closed[0]})", flush=True)
    else:
        print(f"played {tally.done} sessions ({tally.failed} failed)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
