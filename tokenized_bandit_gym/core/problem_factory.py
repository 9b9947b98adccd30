"""The utility families, one frozen parameter dataclass each, in one registry; problems are built from them.

A family is its problem class (its own file) plus one entry in :data:`FAMILIES`: the env
constructors, :func:`make_linear_problem`, :func:`make_multi_armed_problem` and the core's
property tests all read the registry, so a new family gets every one of them. Every synthetic
env (single and vector) builds its instance here, so the checks that span arguments live here
once: which keywords a family takes, the device this torch can use, and an up-front memory bound
(:func:`instance_memory_bytes`) so an oversized instance fails with the memory it would need
instead of inside torch's allocator.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, ClassVar, cast

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


def _default(problem_class: type[TokenizedProblem], name: str) -> Any:
    """The default of ``name`` in ``problem_class``'s constructor (one source for every default)."""
    return inspect.signature(problem_class).parameters[name].default


@dataclass(frozen=True)
class Family:
    """A utility family's own parameters (the shared sizes, seed and device are passed to :meth:`build`).

    Class attributes:
        problem_class: the family's :class:`TokenizedProblem`.
        linear: whether it makes a TLB instance (``TokenizedLinearBandit-v0``'s ``family=``).
        multi_armed: whether it makes a TMAB instance (``TokenizedMultiArmedBandit-v0``'s ``family=``).
    """

    problem_class: ClassVar[type[TokenizedProblem]]
    linear: ClassVar[bool] = True
    multi_armed: ClassVar[bool] = False

    def build(self, **common: Any) -> TokenizedProblem:
        """The instance: ``problem_class(**common, **parameters)`` (the class validates every value)."""
        return self.problem_class(**common, **dataclasses.asdict(self))


@dataclass(frozen=True)
class Discounted(Family):
    """``e(x, y:tau) = alpha * e(x, y) + phi(x, tau, |y| + 1)``: exact DDMC (:class:`DiscountedProblem`)."""

    problem_class: ClassVar[type[TokenizedProblem]] = DiscountedProblem
    multi_armed: ClassVar[bool] = True
    alpha: float = _default(DiscountedProblem, "alpha")
    theta_norm: float = _default(DiscountedProblem, "theta_norm")


@dataclass(frozen=True)
class MeanPool(Family):
    """Mean-pooled non-contextual token vectors: exact DDMC (:class:`MeanPoolProblem`)."""

    problem_class: ClassVar[type[TokenizedProblem]] = MeanPoolProblem
    multi_armed: ClassVar[bool] = True
    theta_norm: float = _default(MeanPoolProblem, "theta_norm")


@dataclass(frozen=True)
class Markov(Family):
    """Discounted plus a bigram term of tunable size ``ddmc_violation`` (:class:`MarkovProblem`)."""

    problem_class: ClassVar[type[TokenizedProblem]] = MarkovProblem
    alpha: float = _default(DiscountedProblem, "alpha")
    theta_norm: float = _default(DiscountedProblem, "theta_norm")
    ddmc_violation: float = _default(MarkovProblem, "ddmc_violation")


@dataclass(frozen=True)
class Needle(Family):
    """Proposition 3.1's lower-bound instance, no DDMC (:class:`NeedleProblem`)."""

    problem_class: ClassVar[type[TokenizedProblem]] = NeedleProblem
    needle_gap: float = _default(NeedleProblem, "needle_gap")


@dataclass(frozen=True)
class RandomTable(Family):
    """TMAB with i.i.d. utilities per response, no DDMC (Proposition 4.1, :class:`RandomTableProblem`)."""

    problem_class: ClassVar[type[TokenizedProblem]] = RandomTableProblem
    linear: ClassVar[bool] = False
    multi_armed: ClassVar[bool] = True


# family name -> its parameter dataclass; a new family adds its problem file and one line here.
FAMILIES: dict[str, type[Family]] = {
    "discounted": Discounted,
    "meanpool": MeanPool,
    "markov": Markov,
    "needle": Needle,
    "random_table": RandomTable,
}

LINEAR_FAMILIES = tuple(name for name, family in FAMILIES.items() if family.linear)
MULTI_ARMED_FAMILIES = tuple(name for name, family in FAMILIES.items() if family.multi_armed)


def family_parameters(family: str, options: dict[str, Any]) -> Family:
    """``FAMILIES[family]`` with the keywords of ``options`` that are set (None keeps the family's default).

    Raises:
        ValueError: a keyword set for a family that does not take it (the message names those that do).
    """
    takes = {key: {field.name for field in dataclasses.fields(other)} for key, other in FAMILIES.items()}
    family_class = FAMILIES[family]
    for name, value in options.items():
        if value is not None and name not in takes[family]:
            users = sorted(key for key, names in takes.items() if name in names)
            raise ValueError(f"{name}={value!r} applies to family {users}, not family={family!r}")
    return family_class(**{name: value for name, value in options.items() if value is not None})


def instance_memory_bytes(
    vocab_size: int, max_length: int, embedding_dim: int, num_queries: int, query_length: int, float_bytes: int
) -> int:
    """A lower bound of the bytes an env over this instance allocates when it is made.

    Counts the tensors every family and the env shell hold at once: the token and query-token
    vectors ``2 x (n, d)`` and the position vectors ``(L, d)`` (float64 while drawn), the token
    gains ``(n,)``, the query pool ``(Q, Lq)`` (int64, three copies while drawn), the action-mask
    table (``(L + 2, L)`` int64 states, ``(L + 2, n)`` bool and int8), the observed candidate
    embeddings ``(n, d)`` (float32) with their observation space's bounds (``low`` and ``high``
    float32, ``bounded_below`` and ``bounded_above`` bool) and the vocabulary ``(n,)`` (int64).
    ``float_bytes`` (the instance dtype's size) adds the copy of the token vectors when it is not float64.
    """
    n, length, d = vocab_size, max_length, embedding_dim
    parameters = 8 * (2 * n * d + length * d + n) + (float_bytes * n * d if float_bytes != 8 else 0)
    query_pool = 3 * 8 * num_queries * query_length
    mask_table = 8 * (length + 2) * length + 2 * (length + 2) * n
    observation = (4 + 2 * 4 + 2) * n * d
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
    **family_options: Any,
) -> LinearTokenizedProblem:
    """A TLB instance of ``family`` (one of :data:`LINEAR_FAMILIES`).

    ``family_options`` (``alpha``, ``ddmc_violation``, ``needle_gap``, ``theta_norm``, ...) left
    as None take the family's default; one given to a family that does not use it raises
    ``ValueError``.
    """
    check_choice("family", family, LINEAR_FAMILIES)
    device, dtype = _check_sizes(vocab_size, max_length, embedding_dim, num_queries, query_length, device, dtype)
    problem = family_parameters(family, family_options).build(
        vocab_size=vocab_size,
        max_length=max_length,
        embedding_dim=embedding_dim,
        num_queries=num_queries,
        query_length=query_length,
        instance_seed=instance_seed,
        fixed_length=fixed_length,
        device=device,
        dtype=dtype,
    )
    if not isinstance(problem, LinearTokenizedProblem):
        raise TypeError(f"family {family!r} builds {type(problem).__name__}, not a LinearTokenizedProblem")
    return problem


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
    **family_options: Any,
) -> TokenizedProblem:
    """A TMAB instance of ``family`` (one of :data:`MULTI_ARMED_FAMILIES`), fixed query.

    A family with features is wrapped in :class:`StopValueProblem` (one query of one token,
    utility in [0, 1]); one without (``random_table``) is built as it is.
    """
    check_choice("family", family, MULTI_ARMED_FAMILIES)
    parameters = family_parameters(family, family_options)
    linear = issubclass(parameters.problem_class, LinearTokenizedProblem)
    # a family without features takes no embedding_dim (the memory bound counts one feature)
    device, dtype = _check_sizes(vocab_size, max_length, embedding_dim if linear else 1, 1, 1, device, dtype)
    common = {
        "vocab_size": vocab_size,
        "max_length": max_length,
        "instance_seed": instance_seed,
        "fixed_length": fixed_length,
        "device": device,
        "dtype": dtype,
    }
    if not linear:
        return parameters.build(**common)
    base = parameters.build(**common, embedding_dim=embedding_dim, num_queries=1, query_length=1)
    return StopValueProblem(cast(LinearTokenizedProblem, base))  # a LinearTokenizedProblem (checked above)
