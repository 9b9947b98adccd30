"""EOFUL per-round cost: Sherman-Morrison rank-one updates vs re-inverting Sigma, side by side.

One EOFUL round is ``steps`` scoring calls (UCB of ``k`` candidates, one matrix product each) and
one update of the confidence set. Both variants do the same scoring; they differ in how
``Sigma^-1`` follows ``Sigma``: ``rank_one`` is :class:`tokenized_bandit_gym.agents.linear_confidence.LinearConfidence`
(Sherman-Morrison, O(d^2) per round), ``inverse`` recomputes ``torch.linalg.inv(Sigma)`` every round
(O(d^3)). The two run interleaved in one process, block by block, and the script reports the
median per-round times and their ratio, for the update alone and for the whole round.

Run: ``PYTHONPATH=. python benchmarks/eoful_rank_one_vs_inverse.py``
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import torch

from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclass
class Args:
    """Benchmark settings (each field is a command-line flag)."""

    dims: tuple[int, ...] = (64, 256, 1024)
    """the embedding dimensions d"""
    candidates: int = 16
    """k, candidates scored per decoding step (the default TLB's n)"""
    steps: int = 8
    """decoding steps per round (the default TLB's L)"""
    rounds: int = 20
    """rounds per timed block"""
    blocks: int = 5
    """timed blocks per variant (interleaved); the median block is reported"""
    threads: int = 1
    """torch intra-op threads (1 keeps timings stable on a shared machine)"""
    seed: int = 0
    """seed of the random features and rewards"""


class ReinvertingConfidence:
    """The baseline: the same ridge estimate, with ``Sigma^-1 = inv(Sigma)`` recomputed every round."""

    def __init__(self, dim: int, max_length: int) -> None:
        self.inner = LinearConfidence(dim, max_length)

    def update(self, feature: torch.Tensor, reward: float) -> None:
        """Add one round and re-invert ``Sigma`` from scratch."""
        inner = self.inner
        inner.design = inner.design + torch.outer(feature, feature)  # (d, d)
        inner.response_sum = inner.response_sum + reward * feature  # (d,)
        inner.rounds += 1
        inner.design_inverse = torch.linalg.inv(inner.design)  # (d, d)
        inner.theta_hat = inner.design_inverse @ inner.response_sum  # (d,)

    def ucb(self, features: torch.Tensor) -> torch.Tensor:
        """The same UCB scores as the rank-one variant."""
        return self.inner.ucb(features)


def time_block(confidence, data, scoring: bool) -> tuple[float, float]:
    """Seconds per round for (update only, scoring + update) over one block of rounds."""
    features, candidates, rewards = data
    update_time = 0.0
    start = time.perf_counter()
    for round_index in range(features.shape[0]):
        if scoring:
            for step in range(candidates.shape[1]):
                confidence.ucb(candidates[round_index, step])  # (k,)
        tick = time.perf_counter()
        confidence.update(features[round_index], float(rewards[round_index]))
        update_time += time.perf_counter() - tick
    total = time.perf_counter() - start
    return update_time / features.shape[0], total / features.shape[0]


def main(args: Args) -> None:
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    print(f"threads={args.threads} k={args.candidates} steps/round={args.steps} rounds/block={args.rounds}")
    print("| d | update: rank-one | update: re-invert | ratio | round: rank-one | round: re-invert | ratio |")
    print("|---|---|---|---|---|---|---|")
    for dim in args.dims:
        variants = {"rank_one": LinearConfidence(dim, args.steps), "inverse": ReinvertingConfidence(dim, args.steps)}
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for _ in range(args.blocks):
            shape = (args.rounds, args.steps, args.candidates, dim)
            candidates = torch.randn(shape, generator=generator, dtype=torch.float64) / math.sqrt(dim)
            features = candidates[:, -1, 0]  # (rounds, d) the submitted responses
            rewards = torch.randn(args.rounds, generator=generator, dtype=torch.float64)
            for name, confidence in variants.items():
                timings[name].append(time_block(confidence, (features, candidates, rewards), scoring=True))
        update = {name: statistics.median(t[0] for t in block) for name, block in timings.items()}
        whole = {name: statistics.median(t[1] for t in block) for name, block in timings.items()}
        print(
            f"| {dim} | {update['rank_one'] * 1e3:.3f} ms | {update['inverse'] * 1e3:.3f} ms "
            f"| {update['inverse'] / update['rank_one']:.1f}x | {whole['rank_one'] * 1e3:.3f} ms "
            f"| {whole['inverse'] * 1e3:.3f} ms | {whole['inverse'] / whole['rank_one']:.1f}x |"
        )


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


if __name__ == "__main__":
    main(parse_args())
