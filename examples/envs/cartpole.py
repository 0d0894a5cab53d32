#!/usr/bin/env python3
"""CartPole-v1 as an RLX external environment, in plain Python.

The dynamics are Gymnasium's (Euler integration, termination past 12
degrees or |x| > 2.4, truncation at 500 steps, reward 1 per step, start
uniform in +-0.05). The process speaks RLX's external-environment
protocol in its JSON-lines form (docs/external-envs.md): one request per
line on stdin, one response per line on stdout. No third-party package.

    env = "exec:python3 examples/envs/cartpole.py"   # in cluster.toml [run]

`--step-ms N` makes every (batched) step take N ms longer, to stand in
for a slow environment (a simulator, a sandbox): [external] args.
"""
import json
import math
import random
import sys
import time

GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4
MAX_STEPS = 500


class CartPole:
    def __init__(self, seed):
        self.rng = random.Random(seed)  # one RNG per env, seeded seed + env id
        self.reset()

    def reset(self):
        self.state = [self.rng.uniform(-0.05, 0.05) for _ in range(4)]
        self.steps = 0
        return list(self.state)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = FORCE_MAG if action == 1 else -FORCE_MAG
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (LENGTH * (4.0 / 3.0 - MASSPOLE * cos * cos / TOTAL_MASS))
        x_acc = temp - POLEMASS_LENGTH * theta_acc * cos / TOTAL_MASS
        x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
        theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
        self.state = [x, x_dot, theta, theta_dot]
        self.steps += 1
        terminated = abs(x) > X_LIMIT or abs(theta) > THETA_LIMIT
        truncated = not terminated and self.steps >= MAX_STEPS
        return 1.0, terminated, truncated


def result(observations, rewards, terminated, truncated, final=None):
    r = {"observations": observations, "rewards": rewards, "terminated": terminated, "truncated": truncated}
    if final:  # the states time limits cut episodes in (the value bootstrap's)
        r["finalObservations"] = final
    return {"result": r}


def main():
    step_s = 0.0
    if "--step-ms" in sys.argv:
        step_s = float(sys.argv[sys.argv.index("--step-ms") + 1]) / 1000.0
    envs = []
    for line in sys.stdin:
        request = json.loads(line)
        if "spec" in request:
            reply = {"spec": {"name": "py-cartpole", "obsDim": 4, "numActions": 2, "maxEpisodeSteps": MAX_STEPS}}
        elif "reset" in request:
            r = request["reset"]
            seed, first, n = int(r.get("seed", 0)), int(r.get("firstEnvId", 0)), int(r["numEnvs"])
            envs = [CartPole(seed + first + i) for i in range(n)]
            obs = [v for env in envs for v in env.state]
            reply = result(obs, [0.0] * n, [False] * n, [False] * n)
        elif "step" in request:
            if step_s > 0:
                time.sleep(step_s)
            obs, rewards, terms, truncs, final = [], [], [], [], []
            for env, action in zip(envs, request["step"]):
                reward, term, trunc = env.step(int(action))
                rewards.append(reward)
                terms.append(term)
                truncs.append(trunc)
                final.extend(env.state)
                obs.extend(env.reset() if term or trunc else env.state)  # ended envs reset themselves
            reply = result(obs, rewards, terms, truncs, final if any(truncs) else None)
        elif "close" in request:
            return
        else:
            reply = {"error": "unknown request " + line.strip()[:80]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
