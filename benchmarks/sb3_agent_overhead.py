"""Cost of running SB3 online through SB3Agent, and of the arena, measured side by side as ratios.

1. SB3Agent (PPO / DQN) inside ``run_online`` against SB3's own ``model.learn()`` on the same env
   (wrapped with ``SB3Observation``) for the same number of steps: the ratio is the cost of the
   lockstep learner thread, the observation encoding and the random-state swaps.
2. ``run_arena`` with M random agents against M separate ``run_online`` runs: the ratio is what
   one batched core of M rows saves over M single envs.

    PYTHONPATH=. python benchmarks/sb3_agent_overhead.py --rounds 200 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import gymnasium as gym
import torch

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena
from tokenized_bandit_gym.adapters.sb3 import SB3Observation
from tokenized_bandit_gym.agents.random_agent import RandomAgent
from tokenized_bandit_gym.agents.sb3_agent import DEFAULT_HYPERPARAMETERS, DEFAULT_POLICY_KWARGS, SB3Agent
from tokenized_bandit_gym.evaluation.run_arena import run_arena
from tokenized_bandit_gym.evaluation.run_online import run_online


@dataclass
class Args:
    """Benchmark settings."""

    env_id: str = "TokenizedLinearBandit-v0"
    rounds: int = 200
    repeats: int = 3
    arena_players: int = 4


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default=Args.env_id)
    parser.add_argument("--rounds", type=int, default=Args.rounds)
    parser.add_argument("--repeats", type=int, default=Args.repeats)
    parser.add_argument("--arena-players", type=int, default=Args.arena_players)
    return Args(**vars(parser.parse_args()))


def sb3_ratio(args: Args, algo: str) -> tuple[float, float, int]:
    """Median seconds of SB3Agent online and of plain learn() for the same steps, and the steps."""
    from sb3_contrib import MaskablePPO  # noqa: F401  (import cost outside the timings)
    from stable_baselines3 import DQN, PPO

    online, plain = [], []
    steps = 0
    for repeat in range(args.repeats):
        agent = SB3Agent(algo)
        start = time.perf_counter()
        run_online(gym.make(args.env_id), agent, args.rounds, seed=repeat)
        online.append(time.perf_counter() - start)
        steps = agent.model.num_timesteps + 1
        algorithm = {"ppo": PPO, "dqn": DQN}[algo]
        torch.set_num_threads(1)  # SB3Agent's default while its learner runs
        env = SB3Observation(gym.make(args.env_id))
        model = algorithm(
            "MlpPolicy",
            env,
            seed=repeat,
            policy_kwargs=DEFAULT_POLICY_KWARGS[algo],
            **DEFAULT_HYPERPARAMETERS[algo],
        )
        start = time.perf_counter()
        model.learn(steps)
        plain.append(time.perf_counter() - start)
    return statistics.median(online), statistics.median(plain), steps


def arena_ratio(args: Args) -> tuple[float, float]:
    """Median seconds of one arena run with M random players and of M separate runs."""
    names = [f"random_{i}" for i in range(args.arena_players)]
    together, apart = [], []
    for repeat in range(args.repeats):
        arena = TokenizedBanditArena(args.env_id, names)
        start = time.perf_counter()
        run_arena(arena, {name: RandomAgent() for name in names}, args.rounds, seed=repeat)
        together.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _ in names:
            run_online(gym.make(args.env_id), RandomAgent(), args.rounds, seed=repeat)
        apart.append(time.perf_counter() - start)
    return statistics.median(together), statistics.median(apart)


def main(args: Args) -> None:
    run_online(gym.make(args.env_id), RandomAgent(), 5, seed=0)  # warm the caches (exact optimum)
    print(f"{args.env_id}, {args.rounds} rounds, median of {args.repeats}")
    for algo in ("ppo", "dqn"):
        online, plain, steps = sb3_ratio(args, algo)
        print(
            f"{algo}: SB3Agent online {online:.2f} s, plain learn() {plain:.2f} s for {steps} steps, "
            f"ratio {online / plain:.2f}"
        )
    together, apart = arena_ratio(args)
    print(
        f"arena, {args.arena_players} random players: {together:.2f} s; {args.arena_players} separate runs "
        f"{apart:.2f} s; ratio {together / apart:.2f}"
    )


if __name__ == "__main__":
    main(parse_args())
