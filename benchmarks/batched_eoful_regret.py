"""The regret cost of batching EOFUL, and its speed, on the native vector env.

Sequential EOFUL (one sub-env, an update after every round) against BatchedEOFUL on N
sub-envs with one update per N ended rounds, same T rounds in all, same seeds, side by side in
one run; EOFUL is ``tokenized_bandit_gym.agents.eoful.EOFUL`` with its defaults (beta "theory", lambda 1,
delta 0.05) and sigma set to the env's noise scale. Reports cumulative regret at T (mean over
seeds), its ratio to sequential, the mean regret of the last quarter of rounds, rounds per
second and the share of time in the agent.

Run: ``PYTHONPATH=. python benchmarks/batched_eoful_regret.py`` (31 s of CPU time, measured on a 2-core
CPU busy with other work; its wall time is shorter on a quiet machine).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.agents.batched_eoful import BatchedEOFUL
from tokenized_bandit_gym.evaluation import run_online_vector
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    env_id: str = "TokenizedLinearBandit-v0"
    """the task (its default kwargs: n = 16, d = 16, L = 8, sigma = 0.1)"""
    rounds: int = 2048
    """T, rounds recorded per run"""
    num_envs: tuple[int, ...] = (1, 8, 64, 512)
    """N sub-envs; the batch size B equals N (N = 1 is sequential EOFUL)"""
    seeds: tuple[int, ...] = (0, 1)
    """seeds of the env streams"""
    device: str = "cpu"
    """torch device of the env and the agent"""
    threads: int = 1
    """torch intra-op threads"""


class TimedAgent:
    """Forwards to a batched agent and adds up the seconds spent in it."""

    def __init__(self, agent: BatchedEOFUL) -> None:
        self.agent, self.seconds, self.name = agent, 0.0, agent.name

    def reset(self, task: Any, num_envs: int, seed: int | None = None) -> None:
        """Forward ``reset``."""
        self.agent.reset(task, num_envs, seed)

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> Any:
        """Forward ``act_batch``, timed."""
        start = time.perf_counter()
        actions = self.agent.act_batch(observations, infos, needs_action)
        self.seconds += time.perf_counter() - start
        return actions

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        """Forward ``update_batch``, timed."""
        start = time.perf_counter()
        self.agent.update_batch(rows, observations, rewards, infos)
        self.seconds += time.perf_counter() - start


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    print(f"{args.env_id}, T = {args.rounds}, seeds {list(args.seeds)}, torch threads {args.threads}")
    print("| N = B | cum. regret at T | vs sequential | last-quarter mean regret | rounds/s | agent share |")
    print("|---|---|---|---|---|---|")
    sequential = None
    for num_envs in args.num_envs:
        regrets, lasts, rates, shares = [], [], [], []
        for seed in args.seeds:
            envs = gym.make_vec(args.env_id, num_envs=num_envs, device=args.device)
            noise_scale = envs.unwrapped.noise_model.scale
            agent = TimedAgent(BatchedEOFUL(batch_size=num_envs, sigma=noise_scale, device=args.device))
            start = time.perf_counter()
            result = run_online_vector(envs, agent, args.rounds, seed=seed)
            elapsed = time.perf_counter() - start
            regrets.append(result.cumulative_regret[-1])
            lasts.append(result.regret[-args.rounds // 4 :].mean())
            rates.append(args.rounds / elapsed)
            shares.append(agent.seconds / elapsed)
        regret = float(np.mean(regrets))
        sequential = regret if sequential is None else sequential
        print(
            f"| {num_envs} | {regret:.2f} | {regret / sequential:.2f}x | {np.mean(lasts):.4f} | "
            f"{np.mean(rates):,.0f} | {np.mean(shares):.0%} |",
            flush=True,
        )


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    main(parse_args())
