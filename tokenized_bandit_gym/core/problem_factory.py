"""Build problem instances by family name: the one place where every synthetic env's arguments are checked.

Every synthetic env (single and vector) builds its instance here, so the checks that span
arguments live here once: which keywords a family takes, the device this torch can use, and
an up-front memory bound (:func:`instance_memory_bytes`) so an oversized instance fails with the
memory it would need instead of inside torch's allocator.
"""

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
from tokenized_bandit_gym.core.validation import check_choice, check_device, check_dtype, check_int, check_memory

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


def instance_memory_bytes(
    vocab_size: int, max_length: int, embedding_dim: int, num_queries: int, query_length: int, float_bytes: int
) -> int:
    """A lower bound of the bytes an env over this instance allocates when it is made.

    Counts the tensors every family and the env shell hold at once: the token and query-token
    vectors ``2 x (n, d)`` and the position vectors ``(L, d)`` (float64 while drawn), the token
    gains ``(n,)``, the query pool ``(Q, Lq)`` (int64, three copies while drawn), the action-mask
    table (``(L + 2, L)`` int64 states, ``(L + 2, n)`` bool and int8), the observed candidate
    embeddings ``(n, d)`` (float32) and the vocabulary ``(n,)`` (int64). ``float_bytes`` (the
    instance dtype's size) adds the copy of the token vectors when it is not float64.
    """
    n, length, d = vocab_size, max_length, embedding_dim
    parameters = 8 * (2 * n * d + length * d + n) + (float_bytes * n * d if float_bytes != 8 else 0)
    query_pool = 3 * 8 * num_queries * query_length
    mask_table = 8 * (length + 2) * length + 2 * (length + 2) * n
    observation = 4 * n * d
    return parameters + query_pool + mask_table + observation + 8 * n


def _check_sizes(
    vocab_size: object,
    max_length: object,
    embedding_dim: object,
    num_queries: object,
    query_length: object,
    device: object,
    dtype: object,
) -> tuple[torch.device, torch.dtype]:
    """Check the types, the device and the memory an instance needs; returns the device and dtype."""
    sizes = {
        "vocab_size": check_int("vocab_size", vocab_size, minimum=2),
        "max_length": check_int("max_length", max_length, minimum=1),
        "embedding_dim": check_int("embedding_dim", embedding_dim, minimum=1),
        "num_queries": check_int("num_queries", num_queries, minimum=1),
        "query_length": check_int("query_length", query_length, minimum=1),
    }
    checked_device, checked_dtype = check_device(device), check_dtype(dtype)
    needed = instance_memory_bytes(**sizes, float_bytes=torch.empty((), dtype=checked_dtype).element_size())
    check_memory(", ".join(f"{name}={value}" for name, value in sizes.items()), needed)
    return checked_device, checked_dtype


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
    dtype: torch.dtype | str,
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
    device, dtype = _check_sizes(vocab_size, max_length, embedding_dim, num_queries, query_length, device, dtype)
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
    dtype: torch.dtype | str,
    alpha: float | None = None,
) -> TokenizedProblem:
    """A TMAB instance of ``family`` (one of :data:`MULTI_ARMED_FAMILIES`), fixed query."""
    check_choice("family", family, MULTI_ARMED_FAMILIES)
    extra = _family_keywords(family, {"alpha": alpha})
    if family == "random_table":
        device, dtype = _check_sizes(vocab_size, max_length, 1, 1, 1, device, dtype)
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
