"""Small problem instances (n <= 5, L = 4, d = 3) shared by the core's property tests."""

from __future__ import annotations

import torch

from tokenized_bandit_gym.core import (
    LINEAR_FAMILIES,
    LinearTokenizedProblem,
    TokenizedProblem,
    make_linear_problem,
    make_multi_armed_problem,
)

SMALL = {
    "vocab_size": 4,
    "max_length": 4,
    "embedding_dim": 3,
    "num_queries": 4,
    "query_length": 3,
    "device": "cpu",
    "dtype": torch.float64,
}


def linear(family: str, seed: int = 0, fixed_length: bool = False, **extra: object) -> LinearTokenizedProblem:
    options = dict(SMALL, instance_seed=seed, fixed_length=fixed_length)
    if family == "needle":
        options["vocab_size"] = 3
    options.update(extra)
    return make_linear_problem(family, **options)


def multi_armed(family: str, seed: int = 0, fixed_length: bool = False, **extra: object) -> TokenizedProblem:
    return make_multi_armed_problem(
        family,
        vocab_size=4,
        max_length=4,
        embedding_dim=3,
        instance_seed=seed,
        fixed_length=fixed_length,
        device="cpu",
        dtype=torch.float64,
        **extra,
    )


def exact_ddmc_families() -> list[tuple[str, dict[str, object]]]:
    """The registry's TLB families that claim exact DDMC at their defaults, and markov without its bigram term."""
    claimed = [(family, {}) for family in LINEAR_FAMILIES if linear(family).ddmc]
    return [*claimed, ("markov", {"ddmc_violation": 0.0})]
