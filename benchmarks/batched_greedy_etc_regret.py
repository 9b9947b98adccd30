"""The regret cost of batching GreedyETC on the native vector env.

Sequential GreedyETC (one sub-env, an update after every round) against BatchedGreedyETC on N
sub-envs with one update per B = N ended rounds, same T rounds in all, same seeds. The
exploration parameter N_explore is fixed (``--exploration-rounds``), so that exploration ends
well within T and the cost of batching (rounds that explore past N_explore while the agent waits
for its update, and rounds in flight at each commit) shows against the same committed
responses. Reports cumulative regret at T (mean over seeds), its ratio to sequential, the
rounds until the agent committed, how many seeds committed to the sequential agent's response,
the mean regret of the last quarter of rounds, and rounds per second (± is the standard error
over seeds).

Run: ``PYTHONPATH=. python benchmarks/batched_greedy_etc_regret.py`` (97 s of CPU time, measured on a
2-core CPU busy with other work; its wall time is about that on a quiet machine).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the ids)
from tokenized_bandit_gym.agents.batched_greedy_etc import BatchedGreedyETC
from tokenized_bandit_gym.evaluation import run_online_vector
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclasses.dataclass
class Args:
    """Command-line arguments (each field's docstring is its ``--help``)."""

    env_id: str = "TokenizedMultiArmedBandit-v0"
    """the task (its default kwargs: n = 8, L = 6, discounted family, sigma = 0.1)"""
    rounds: int = 4096
    """T, rounds recorded per run"""
    exploration_rounds: int = 16
    """N_explore, submissions of each y:t:EOS per level"""
    num_envs: tuple[int, ...] = (1, 8, 64, 512)
    """N sub-envs; the batch size B equals N (N = 1 is sequential GreedyETC)"""
    seeds: tuple[int, ...] = tuple(range(10))
    """seeds of the env streams"""
    threads: int = 1
    """torch intra-op threads"""


class CommitWatcher:
    """Forwards to a BatchedGreedyETC and notes after how many ended rounds it committed."""

    def __init__(self, agent: BatchedGreedyETC) -> None:
        self.agent, self.name = agent, agent.name
        self.rounds_seen = 0
        self.commit_round: int | None = None

    def reset(self, task: Any, num_envs: int, seed: int | None = None) -> None:
        """Forward ``reset``."""
        self.agent.reset(task, num_envs, seed)

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> Any:
        """Forward ``act_batch``."""
        return self.agent.act_batch(observations, infos, needs_action)

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        """Forward ``update_batch`` and note the commit."""
        self.agent.update_batch(rows, observations, rewards, infos)
        self.rounds_seen += len(rows)
        if self.commit_round is None and self.agent.committed_response is not None:
            self.commit_round = self.rounds_seen


def main(args: Args) -> list[tuple[int, float]]:
    """Print one table row per N and return ``(N, mean cumulative regret)``."""
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(
        f"{args.env_id}, T = {args.rounds}, N_explore = {args.exploration_rounds}, seeds {list(args.seeds)}, "
        f"load average {load[0]:.2f} {load[1]:.2f}"
    )
    print(
        "| N = B | cum. regret at T | vs sequential | rounds to commit | same commit as sequential | "
        "last-quarter mean regret | rounds/s |"
    )
    print("|---|---|---|---|---|---|---|")
    sequential_regret, sequential_commits = None, {}
    rows = []
    for num_envs in args.num_envs:
        regrets, commit_rounds, lasts, rates, same = [], [], [], [], 0
        for seed in args.seeds:
            envs = gym.make_vec(args.env_id, num_envs=num_envs)
            agent = CommitWatcher(BatchedGreedyETC(batch_size=num_envs, exploration_rounds=args.exploration_rounds))
            start = time.perf_counter()
            result = run_online_vector(envs, agent, args.rounds, seed=seed)
            rates.append(args.rounds / (time.perf_counter() - start))
            regrets.append(result.cumulative_regret[-1])
            lasts.append(result.regret[-args.rounds // 4 :].mean())
            commit_rounds.append(agent.commit_round if agent.commit_round is not None else np.nan)
            response = agent.agent.committed_response
            if sequential_regret is None:
                sequential_commits[seed] = response
            same += int(response == sequential_commits[seed])
        regret = float(np.mean(regrets))
        spread = float(np.std(regrets, ddof=1) / np.sqrt(len(regrets))) if len(regrets) > 1 else 0.0
        sequential_regret = regret if sequential_regret is None else sequential_regret
        print(
            f"| {num_envs} | {regret:.1f} ± {spread:.1f} | {regret / sequential_regret:.2f}x | "
            f"{np.mean(commit_rounds):,.0f} | "
            f"{same}/{len(args.seeds)} | {np.mean(lasts):.4f} | {np.mean(rates):,.0f} |",
            flush=True,
        )
        rows.append((num_envs, regret))
    return rows


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    main(parse_args())
