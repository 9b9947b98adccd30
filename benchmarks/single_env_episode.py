"""Per-episode cost of the single envs (random allowed actions), default kwargs, on the CPU.

Run: ``python benchmarks/single_env_episode.py``. Prints, per registered synthetic id, the wall
time per episode and per step, and the number of torch (aten) operations per step, which is what
bounds a batch-of-one torch env on a CPU. Results go in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields

import gymnasium as gym
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from tokenized_bandit_gym.registration import SYNTHETIC_ENVS


@dataclass
class Args:
    """Command-line arguments."""

    episodes: int = 500
    """timed episodes per env id"""
    threads: int = 1
    """torch threads"""


def play(env: gym.Env, episodes: int, rng: np.random.Generator) -> int:
    steps = 0
    for _ in range(episodes):
        observation, _ = env.reset()
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, _, terminated, _, _ = env.step(action)
            steps += 1
    return steps


def main(args: Args) -> list[tuple[str, float, float, float]]:
    torch.set_num_threads(args.threads)
    rows = []
    for env_id in SYNTHETIC_ENVS:
        env = gym.make(env_id).unwrapped
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        play(env, 20, rng)
        start = time.perf_counter()
        steps = play(env, args.episodes, rng)
        elapsed = time.perf_counter() - start
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            profiled_steps = play(env, 20, rng)
        operations = sum(event.count for event in profiler.key_averages() if event.key.startswith("aten::"))
        rows.append((env_id, elapsed / args.episodes * 1e3, elapsed / steps * 1e6, operations / profiled_steps))
        print(f"{env_id:42s} {rows[-1][1]:6.2f} ms/episode {rows[-1][2]:7.1f} us/step {rows[-1][3]:6.1f} ops/step")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    for field in fields(Args):
        parser.add_argument(f"--{field.name}", type=type(field.default), default=field.default)
    main(Args(**vars(parser.parse_args())))
