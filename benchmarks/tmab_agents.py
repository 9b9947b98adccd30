"""Cumulative regret of the TMAB agents side by side on tiny instances (DDMC' and random table).

Every agent plays the same seeded stream (common random numbers) through ``run_online``; the
table gives the cumulative regret over T rounds, the mean regret over the last 20% of rounds
and the share of those rounds that played the exact optimum's utility.

Run: ``PYTHONPATH=. python benchmarks/tmab_agents.py`` (``--help`` for the options).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents import make
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclasses.dataclass
class Args:
    """Options (each field is a command-line flag)."""

    rounds: int = 800
    """T, rounds per run"""
    seeds: int = 2
    """runs per agent and instance (averaged)"""


INSTANCES: list[tuple[str, dict[str, Any]]] = [
    ("TokenizedMultiArmedBandit-v0", {"vocab_size": 3, "max_length": 3, "instance_seed": 6}),
    ("TokenizedMultiArmedBanditRandomTable-v0", {"vocab_size": 3, "max_length": 3, "instance_seed": 5}),
]

AGENTS: list[tuple[str, dict[str, Any]]] = [
    ("random", {}),
    ("oracle_greedy", {}),
    ("greedy_etc", {}),
    ("greedy_etc", {"exploration_rounds": 30}),
    ("lookahead_etc", {"lookahead": 2, "exploration_rounds": 20}),
    ("greedy_ucb", {"exploration": 0.1}),
    ("uct", {"exploration": 0.3}),
    ("uct", {}),
]


def main(args: Args) -> None:
    """Print one markdown table per instance."""
    for env_id, env_kwargs in INSTANCES:
        print(f"\n{env_id} {env_kwargs}, T = {args.rounds}, {args.seeds} seeds")
        print("| agent | kwargs | R(T) | last-20% regret | last-20% optimal |")
        print("|---|---|---|---|---|")
        for name, kwargs in AGENTS:
            totals, lates, optimal = [], [], []
            for seed in range(args.seeds):
                env = gym.make(env_id, **env_kwargs)
                result = run_online(env, make(name, **kwargs), args.rounds, seed=seed)
                late = result.regret[-args.rounds // 5 :]
                totals.append(result.regret.sum())
                lates.append(late.mean())
                optimal.append(np.mean(late < 1e-12))
            print(
                f"| {name} | {kwargs or ''} | {np.mean(totals):.1f} | {np.mean(lates):.4f} | {np.mean(optimal):.2f} |",
                flush=True,
            )


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    main(parse_args())
