"""Build problem instances by family name, checking which keywords each family takes."""

from __future__ import annotations

from typing import Any

import torch

from tokenized_bandit_gym.core.discounted_problem import DiscountedProblem
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.markov_problem import MarkovProblem
from tokenized_bandit_gym.core.meanpool_problem import MeanPoolProblem
from tokenized_bandit_gym.core.needle_problem import NeedleProblem
from tokenized_bandit_gym.core.random_table_problem import RandomTableProblem
from tokenized_bandit_gym.core.stop_value_problem import StopValueProblem
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_choice

LINEAR_FAMILIES = ("discounted", "meanpool", "markov", "needle")
MULTI_ARMED_FAMILIES = ("discounted", "meanpool", "random_table")

# Keywords that only some families take; passing one to another family is an error.
_FAMILY_KEYWORDS = {
    "alpha": {"discounted", "markov"},
    "ddmc_violation": {"markov"},
    "needle_gap": {"needle"},
    "theta_norm": {"discounted", "meanpool", "markov"},
}


def _family_keywords(family: str, options: dict[str, Any]) -> dict[str, Any]:
    """Drop unset family keywords and reject those the family does not take."""
    chosen = {}
    for name, value in options.items():
        if value is None:
            continue
        if family not in _FAMILY_KEYWORDS[name]:
            users = sorted(_FAMILY_KEYWORDS[name])
            raise ValueError(f"{name}={value!r} applies to family {users}, not family={family!r}")
        chosen[name] = value
    return chosen


def make_linear_problem(
    family: str,
    *,
    vocab_size: int,
    max_length: int,
    embedding_dim: int,
    num_queries: int,
    query_length: int,
    instance_seed: int,
    fixed_length: bool,
    device: torch.device | str,
    dtype: torch.dtype,
    alpha: float | None = None,
    ddmc_violation: float | None = None,
    needle_gap: float | None = None,
    theta_norm: float | None = None,
) -> LinearTokenizedProblem:
    """A TLB instance of ``family`` (one of :data:`LINEAR_FAMILIES`).

    Family keywords left as None take the family's default; one given to a family that does
    not use it raises ``ValueError``.
    """
    check_choice("family", family, LINEAR_FAMILIES)
    options = {"alpha": alpha, "ddmc_violation": ddmc_violation, "needle_gap": needle_gap, "theta_norm": theta_norm}
    extra = _family_keywords(family, options)
    common: dict[str, Any] = {
        "vocab_size": vocab_size,
        "max_length": max_length,
        "embedding_dim": embedding_dim,
        "num_queries": num_queries,
        "query_length": query_length,
        "instance_seed": instance_seed,
        "fixed_length": fixed_length,
        "device": device,
        "dtype": dtype,
    }
    classes = {
        "discounted": DiscountedProblem,
        "meanpool": MeanPoolProblem,
        "markov": MarkovProblem,
        "needle": NeedleProblem,
    }
    return classes[family](**common, **extra)


def make_multi_armed_problem(
    family: str,
    *,
    vocab_size: int,
    max_length: int,
    embedding_dim: int,
    instance_seed: int,
    fixed_length: bool,
    device: torch.device | str,
    dtype: torch.dtype,
    alpha: float | None = None,
) -> TokenizedProblem:
    """A TMAB instance of ``family`` (one of :data:`MULTI_ARMED_FAMILIES`), fixed query."""
    check_choice("family", family, MULTI_ARMED_FAMILIES)
    extra = _family_keywords(family, {"alpha": alpha})
    if family == "random_table":
        return RandomTableProblem(vocab_size, max_length, instance_seed, fixed_length, device, dtype)
    base = make_linear_problem(
        family,
        vocab_size=vocab_size,
        max_length=max_length,
        embedding_dim=embedding_dim,
        num_queries=1,
        query_length=1,
        instance_seed=instance_seed,
        fixed_length=fixed_length,
        device=device,
        dtype=dtype,
        **extra,
    )
    return StopValueProblem(base)
