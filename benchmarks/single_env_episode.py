"""Per-episode cost of the single envs (random allowed actions), default kwargs, on the CPU.

Run: ``PYTHONPATH=. python benchmarks/single_env_episode.py``. Prints, per registered synthetic id,
the wall time per episode (reset, every step and the last step's info with the exact regret)
and per step, through ``gym.make`` (its default wrappers: order enforcing, passive checker) and
unwrapped, and the number of torch (aten) operations per step, which is what bounds a
batch-of-one torch env on a CPU. The two ways and the ids are timed in interleaved chunks and
the median chunk is kept (the machines are shared and noisy). Results go in
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
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

    episodes: int = 100
    """timed episodes per chunk"""
    chunks: int = 5
    """interleaved chunks per env id and way (the median chunk is reported)"""
    threads: int = 1
    """torch threads"""
    env_ids: str = ",".join(SYNTHETIC_ENVS)
    """comma-separated ids to measure"""


def play(env: gym.Env, episodes: int, rng: np.random.Generator) -> int:
    """Play ``episodes`` rounds with uniformly random allowed actions; return the steps taken."""
    steps = 0
    for _ in range(episodes):
        observation, _ = env.reset()
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, _, terminated, _, _ = env.step(action)
            steps += 1
    return steps


def main(args: Args) -> list[tuple[str, float, float, float, float]]:
    """Time every id both ways; return ``(id, ms/episode made, ms/episode unwrapped, us/step, ops/step)``."""
    torch.set_num_threads(args.threads)
    ids = args.env_ids.split(",")
    envs: dict[tuple[str, str], gym.Env] = {}
    for env_id in ids:
        made = gym.make(env_id)
        envs[env_id, "made"] = made
        envs[env_id, "unwrapped"] = gym.make(env_id).unwrapped
    rngs = {key: np.random.default_rng(0) for key in envs}
    for key, env in envs.items():
        env.reset(seed=0)
        play(env, 20, rngs[key])
    times: dict[tuple[str, str], list[float]] = {key: [] for key in envs}
    steps: dict[tuple[str, str], int] = dict.fromkeys(envs, 0)
    for _ in range(args.chunks):
        for key, env in envs.items():
            start = time.perf_counter()
            steps[key] += play(env, args.episodes, rngs[key])
            times[key].append(time.perf_counter() - start)
    rows = []
    for env_id in ids:
        made, unwrapped = (statistics.median(times[env_id, way]) / args.episodes * 1e3 for way in ("made", "unwrapped"))
        steps_per_episode = steps[env_id, "unwrapped"] / (args.chunks * args.episodes)
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            profiled_steps = play(envs[env_id, "unwrapped"], 20, rngs[env_id, "unwrapped"])
        operations = sum(event.count for event in profiler.key_averages() if event.key.startswith("aten::"))
        rows.append((env_id, made, unwrapped, unwrapped / steps_per_episode * 1e3, operations / profiled_steps))
        print(
            f"{env_id:42s} gym.make {made:6.3f} ms/episode  unwrapped {unwrapped:6.3f} ms/episode "
            f"{rows[-1][3]:6.1f} us/step {rows[-1][4]:6.1f} ops/step"
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    for field in fields(Args):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    main(Args(**vars(parser.parse_args())))
