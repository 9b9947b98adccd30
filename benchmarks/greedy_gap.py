"""The greedy gap of every registered synthetic env: OracleGreedy's regret against the exact optimum.

For each registered id (default kwargs) and each query x of its pool, the gap is
``u(x, y*) - u(x, y_greedy)`` with ``y*`` the exact optimum (``problem.optimal``: dynamic program
or enumeration) and ``y_greedy`` greedy decoding with the true utility (``problem.oracle_greedy``).
Queries are drawn uniformly from the pool, so the mean over the pool is OracleGreedy's expected
per-round regret: no greedy-based agent (EOFUL, GreedyETC, ...) can go below it in expectation.

Run: ``PYTHONPATH=. python benchmarks/greedy_gap.py`` (prints a Markdown table).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import gymnasium as gym
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.registration import registered_ids
from tokenized_bandit_gym.threads import use_small_work_threads


@dataclass
class Args:
    """Script settings."""

    tolerance: float = 1e-12
    """gaps at or below this count as zero (floating-point rounding)"""


def main(args: Args) -> None:
    print("| env id | n | L | fixed_length | mean optimal u | mean greedy gap | max gap | queries with a gap |")
    print("|---|---|---|---|---|---|---|---|")
    for env_id in sorted(registered_ids()):
        problem = gym.make(env_id).unwrapped.problem
        queries = torch.arange(problem.num_queries, device=problem.device)
        optimum = problem.optimal(queries).utility  # (Q,)
        gap = optimum - problem.oracle_greedy(queries).utility  # (Q,)
        gap = torch.where(gap.abs() <= args.tolerance, torch.zeros_like(gap), gap)
        with_gap = int((gap > 0).sum())
        print(
            f"| {env_id} | {problem.vocab_size} | {problem.max_length} | {problem.fixed_length} "
            f"| {float(optimum.mean()):.4f} | {float(gap.mean()):.4f} | {float(gap.max()):.4f} "
            f"| {with_gap}/{problem.num_queries} |"
        )


if __name__ == "__main__":
    use_small_work_threads()  # one torch thread unless OMP_NUM_THREADS says otherwise
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tolerance", type=float, default=Args.tolerance)
    main(Args(tolerance=parser.parse_args().tolerance))
