#!/usr/bin/env python3
"""The main job's baseline from the field: PPO on CartPole-v1 with CleanRL's
ppo.py settings, written here in plain PyTorch (Debian's python3-torch) with
Gymnasium's CartPole-v1 dynamics in numpy, stopped by RLX's rule (a mean
return of 475 over the last 100 episodes, at least 100 ended).

CleanRL's defaults (docs.cleanrl.dev, ppo.py): 4 envs x 128 steps per
update, 4 epochs of 4 minibatches, Adam lr 2.5e-4 annealed linearly over
500,000 steps (eps 1e-5), gamma 0.99, GAE lambda 0.95, advantages
normalised per minibatch, clip 0.2 on the ratio and the value, entropy 0.01,
value 0.5, gradient norm 0.5; two 64-wide tanh layers for the actor and the
critic, orthogonal initialisation. As in ppo.py, an episode cut at 500 steps
is treated as ended (no bootstrap).

    /usr/bin/python3 bench/cleanrl_cartpole.py [--seeds 1 2 3 4 5] [--threads N]

Prints one line per seed (env steps and seconds to solve) and the medians;
docs/results/main-job.md "Against CleanRL" has the figures.
"""
import argparse
import math
import statistics
import time

import numpy as np
import torch
from torch import nn


class CartPoles:
    """N CartPole-v1 environments (Gymnasium's equations), reset on end."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, size=(n, 4))
        self.steps = np.zeros(n, dtype=np.int64)
        self.returns = np.zeros(n)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, 10.0, -10.0)
        cos, sin = np.cos(theta), np.sin(theta)
        total_mass, pole_mass_length, length = 1.1, 0.05, 0.5
        temp = (force + pole_mass_length * theta_dot**2 * sin) / total_mass
        theta_acc = (9.8 * sin - cos * temp) / (length * (4.0 / 3.0 - 0.1 * cos**2 / total_mass))
        x_acc = temp - pole_mass_length * theta_acc * cos / total_mass
        tau = 0.02
        x, x_dot = x + tau * x_dot, x_dot + tau * x_acc
        theta, theta_dot = theta + tau * theta_dot, theta_dot + tau * theta_acc
        self.state = np.stack([x, x_dot, theta, theta_dot], axis=1)
        self.steps += 1
        self.returns += 1.0
        ended = (np.abs(x) > 2.4) | (np.abs(theta) > 12 * 2 * math.pi / 360) | (self.steps >= 500)
        finished = self.returns[ended].tolist()
        k = int(ended.sum())
        if k:
            self.state[ended] = self.rng.uniform(-0.05, 0.05, size=(k, 4))
            self.steps[ended] = 0
            self.returns[ended] = 0.0
        return self.state.copy(), ended, finished


def layer(i, o, std=math.sqrt(2)):
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(layer(4, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
        self.actor = nn.Sequential(layer(4, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 2, 0.01))

    def value(self, x):
        return self.critic(x)

    def act(self, x, action=None):
        dist = torch.distributions.Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def solve(seed, total_steps=500_000, envs=4, steps=128, epochs=4, minibatches=4):
    torch.manual_seed(seed)
    np.random.seed(seed)
    env = CartPoles(envs, seed)
    agent = Agent()
    opt = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    batch = envs * steps
    updates = total_steps // batch
    obs_buf = torch.zeros(steps, envs, 4)
    act_buf = torch.zeros(steps, envs, dtype=torch.long)
    logp_buf = torch.zeros(steps, envs)
    rew_buf = torch.zeros(steps, envs)
    done_buf = torch.zeros(steps, envs)
    val_buf = torch.zeros(steps, envs)
    obs = torch.tensor(env.state, dtype=torch.float32)
    done = torch.zeros(envs)
    recent = []
    episodes = 0
    start = time.perf_counter()
    for update in range(1, updates + 1):
        opt.param_groups[0]["lr"] = (1.0 - (update - 1.0) / updates) * 2.5e-4
        for t in range(steps):
            obs_buf[t], done_buf[t] = obs, done
            with torch.no_grad():
                action, logp, _, value = agent.act(obs)
            val_buf[t], act_buf[t], logp_buf[t] = value.flatten(), action, logp
            next_obs, ended, finished = env.step(action.numpy())
            rew_buf[t] = 1.0
            obs, done = torch.tensor(next_obs, dtype=torch.float32), torch.tensor(ended, dtype=torch.float32)
            for r in finished:
                episodes += 1
                recent = (recent + [r])[-100:]
                if episodes >= 100 and statistics.fmean(recent) >= 475.0:
                    env_steps = ((update - 1) * steps + t + 1) * envs
                    return env_steps, time.perf_counter() - start
        with torch.no_grad():
            next_value = agent.value(obs).flatten()
            adv = torch.zeros(steps, envs)
            last = torch.zeros(envs)
            for t in reversed(range(steps)):
                not_done = 1.0 - (done if t == steps - 1 else done_buf[t + 1])
                next_v = next_value if t == steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + 0.99 * next_v * not_done - val_buf[t]
                last = delta + 0.99 * 0.95 * not_done * last
                adv[t] = last
            ret = adv + val_buf
        b_obs, b_act, b_logp = obs_buf.reshape(-1, 4), act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret, b_val = adv.reshape(-1), ret.reshape(-1), val_buf.reshape(-1)
        size = batch // minibatches
        for _ in range(epochs):
            order = torch.randperm(batch)
            for s in range(0, batch, size):
                mb = order[s:s + size]
                _, logp, entropy, value = agent.act(b_obs[mb], b_act[mb])
                ratio = (logp - b_logp[mb]).exp()
                a = b_adv[mb]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean()
                value = value.flatten()
                clipped = b_val[mb] + (value - b_val[mb]).clamp(-0.2, 0.2)
                v_loss = 0.5 * torch.max((value - b_ret[mb]) ** 2, (clipped - b_ret[mb]) ** 2).mean()
                loss = pg - 0.01 * entropy.mean() + 0.5 * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()
    return None, time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    steps, seconds = [], []
    for seed in a.seeds:
        n, s = solve(seed)
        print(f"seed {seed}: " + (f"solved after {n} env steps in {s:.1f} s" if n else f"not solved in 500,000 steps ({s:.1f} s)"),
              flush=True)
        if n:
            steps.append(n)
            seconds.append(s)
    if steps:
        print(f"median: {statistics.median(steps):.0f} env steps, {statistics.median(seconds):.1f} s "
              f"({len(steps)} of {len(a.seeds)} seeds solved)")


if __name__ == "__main__":
    main()
