"""Quickstart: make a tokenized bandit env, play random and oracle-greedy rounds, read regret.

Run: ``python examples/quickstart.py`` (a second or two on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation import run_online
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclass
class Args:
    """Command-line arguments."""

    env_id: str = "TokenizedLinearBandit-v0"
    """a registered env id"""
    rounds: int = 200
    """rounds (episodes) per agent"""
    seed: int = 0
    """seed of the query and noise streams (the same for every agent: common random numbers)"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


def main(args: Args) -> dict[str, float]:
    env = gym.make(args.env_id)
    observation, info = env.reset(seed=args.seed)
    print(f"{args.env_id}: observation keys {sorted(observation)}")
    terminated = False
    while not terminated:
        observation, reward, terminated, truncated, info = env.step(env.action_space.sample(observation["action_mask"]))
    print(f"one random round: response {info['response'].tolist()}, reward {reward:.3f}, regret {info['regret']:.3f}")
    totals = {}
    for name in ("random", "oracle_greedy"):
        result = run_online(env, agents.make(name), rounds=args.rounds, seed=args.seed)
        totals[name] = float(result.cumulative_regret[-1])
        print(f"{name:>14}: cumulative regret after {args.rounds} rounds = {totals[name]:.3f}")
    return totals


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
