#!/usr/bin/env python3
"""A task with a deferred reward, as an RLX external environment: each
episode is one step; the observation is two digits (a, b) in 0..2 and the
action is the answer, 0..4. The env does not score it: it ends the episode
with reward 0 and the reward payload "a+b\\nANSWER", which a reward worker
(RLX's ArithmeticScorer) scores 1 when right, 0 when wrong. The policy can
only learn what the reward pool tells it: the smallest form of the
test-based rewards of the coding workload (docs/external-envs.md).

    env = "exec:python3 examples/envs/sum_task.py"   # with [[node]] rewards >= 1
"""
import json
import random
import sys


def main():
    envs = []
    for line in sys.stdin:
        request = json.loads(line)
        if "spec" in request:
            reply = {"spec": {"name": "sum-task", "obsDim": 2, "numActions": 5, "maxEpisodeSteps": 1}}
        elif "reset" in request:
            r = request["reset"]
            seed, first, n = int(r.get("seed", 0)), int(r.get("firstEnvId", 0)), int(r["numEnvs"])
            envs = [random.Random(seed + first + i) for i in range(n)]
            tasks = [(rng.randrange(3), rng.randrange(3)) for rng in envs]
            reply = {"result": {"observations": [float(v) for t in tasks for v in t], "rewards": [0.0] * n,
                                "terminated": [False] * n, "truncated": [False] * n}}
        elif "step" in request:
            payloads = ["%d+%d\n%d" % (a, b, int(action)) for (a, b), action in zip(tasks, request["step"])]
            tasks = [(rng.randrange(3), rng.randrange(3)) for rng in envs]  # every episode ends: a new task
            n = len(envs)
            reply = {"result": {"observations": [float(v) for t in tasks for v in t], "rewards": [0.0] * n,
                                "terminated": [True] * n, "truncated": [False] * n, "rewardPayloads": payloads}}
        elif "close" in request:
            return
        else:
            reply = {"error": "unknown request " + line.strip()[:80]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
