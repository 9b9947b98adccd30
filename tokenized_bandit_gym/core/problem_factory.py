"""The utility families, one frozen parameter dataclass each, in one registry; problems are built from them.

A family is its problem class (its own file) plus one entry in :data:`FAMILIES`: the env
configs (:mod:`tokenized_bandit_gym.envs.synthetic_config`), :func:`build_linear_problem`,
:func:`build_multi_armed_problem` and the core's property tests all read the registry when they
run, so a new family gets every one of them, every option of its dataclass included. Every
synthetic env (single and vector) builds its instance here from its config's
:class:`~tokenized_bandit_gym.core.instance_sizes.InstanceSizes` and family, so the checks that
span arguments live here once: which keywords a family takes, the device this torch can use, and
an up-front memory bound (:func:`instance_memory_bytes`) so an oversized instance fails with the
memory it would need instead of inside torch's allocator.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import torch

from tokenized_bandit_gym.core.discounted_problem import DiscountedProblem
from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.markov_problem import MarkovProblem
from tokenized_bandit_gym.core.meanpool_problem import MeanPoolProblem
from tokenized_bandit_gym.core.needle_problem import NeedleProblem
from tokenized_bandit_gym.core.random_table_problem import RandomTableProblem
from tokenized_bandit_gym.core.stop_value_problem import StopValueProblem
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_choice, check_device, check_dtype, check_int, check_memory

FamilyKind = Literal["linear", "multi_armed"]
"""The env kinds a family can play: ``"linear"`` (TLB) and ``"multi_armed"`` (TMAB)."""


def _default(problem_class: type[TokenizedProblem], name: str) -> Any:
    """The default of ``name`` in ``problem_class``'s constructor (one source for every default)."""
    return inspect.signature(problem_class).parameters[name].default


@dataclass(frozen=True)
class Family:
    """A utility family's own parameters (the shared sizes, seed and device are passed to :meth:`build`).

    Class attributes:
        problem_class: the family's :class:`TokenizedProblem`, built as
            ``problem_class(sizes, **parameters)``.
        linear: whether it makes a TLB instance (``TokenizedLinearBandit-v0``'s ``family=``).
        multi_armed: whether it makes a TMAB instance (``TokenizedMultiArmedBandit-v0``'s ``family=``).
    """

    problem_class: ClassVar[type[TokenizedProblem]]
    linear: ClassVar[bool] = True
    multi_armed: ClassVar[bool] = False

    def build(self, sizes: InstanceSizes) -> TokenizedProblem:
        """The instance: ``problem_class(sizes, **parameters)`` (the class validates every value)."""
        construct = cast("Callable[..., TokenizedProblem]", self.problem_class)  # a family's (sizes, **options)
        return construct(sizes, **dataclasses.asdict(self))

    @classmethod
    def plays(cls, kind: FamilyKind) -> bool:
        """Whether this family makes an instance of ``kind`` (``"linear"`` or ``"multi_armed"``)."""
        return cls.linear if kind == "linear" else cls.multi_armed


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


def families_playing(kind: FamilyKind) -> tuple[str, ...]:
    """The names in :data:`FAMILIES` now (a family registered later included) that play ``kind``."""
    return tuple(name for name, family in FAMILIES.items() if family.plays(kind))


LINEAR_FAMILIES = families_playing("linear")
"""The TLB families registered with the package (``families_playing("linear")`` also sees later ones)."""
MULTI_ARMED_FAMILIES = families_playing("multi_armed")
"""The TMAB families registered with the package (``families_playing("multi_armed")`` also sees later ones)."""


def family_name(family: Family | type[Family]) -> str:
    """The name :data:`FAMILIES` registers ``family``'s class under.

    Raises:
        ValueError: the class is not registered.
    """
    family_class = family if isinstance(family, type) else type(family)
    for name, registered in FAMILIES.items():
        if registered is family_class:
            return name
    raise ValueError(f"{family_class.__name__} is not in FAMILIES; known: {sorted(FAMILIES)}")


def family_option_names() -> dict[str, tuple[str, ...]]:
    """Every registered family's own keywords: ``{family name: (field names)}``."""
    return {name: tuple(field.name for field in dataclasses.fields(family)) for name, family in FAMILIES.items()}


def with_options(family: Family, options: Mapping[str, Any]) -> Family:
    """``family`` with the keywords of ``options`` that are set (None keeps the value ``family`` has).

    Raises:
        TypeError: a keyword no registered family takes.
        ValueError: a keyword set for a family that does not take it (the message names those that do).
    """
    takes = family_option_names()
    name = family_name(family)
    chosen = {key: value for key, value in options.items() if value is not None}
    for key, value in chosen.items():
        if key not in takes[name]:
            users = sorted(other for other, names in takes.items() if key in names)
            if not users:
                raise TypeError(f"unexpected keyword {key}={value!r}: no family takes it (families: {takes})")
            raise ValueError(f"{key}={value!r} applies to family {users}, not family={name!r}")
    return dataclasses.replace(family, **chosen) if chosen else family


def family_parameters(family: str, options: Mapping[str, Any]) -> Family:
    """``FAMILIES[family]`` with the keywords of ``options`` that are set (None keeps the family's default).

    Raises:
        ValueError: ``family`` is not registered, or a keyword set for a family that does not take it.
        TypeError: a keyword no registered family takes.
    """
    check_choice("family", family, tuple(FAMILIES))
    return with_options(FAMILIES[family](), options)


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


def checked_sizes(sizes: InstanceSizes) -> InstanceSizes:
    """``sizes`` with the device and dtype as torch objects, after the checks that span them.

    Checks the types of the sizes, the device this torch can use, the dtype, and the memory the
    instance needs (:func:`instance_memory_bytes`), before anything is drawn.

    Raises:
        TypeError: a size is not an integer.
        ValueError: a size is below 1 (``vocab_size`` below 2), an unknown device or dtype, or an
            instance larger than the available memory (the message names the sizes and the bytes).
    """
    counted = {
        "vocab_size": check_int("vocab_size", sizes.vocab_size, minimum=2),
        "max_length": check_int("max_length", sizes.max_length, minimum=1),
        "embedding_dim": check_int("embedding_dim", sizes.embedding_dim, minimum=1),
        "num_queries": check_int("num_queries", sizes.num_queries, minimum=1),
        "query_length": check_int("query_length", sizes.query_length, minimum=1),
    }
    device, dtype = check_device(sizes.device), check_dtype(sizes.dtype)
    needed = instance_memory_bytes(**counted, float_bytes=torch.empty((), dtype=dtype).element_size())
    check_memory(", ".join(f"{name}={value}" for name, value in counted.items()), needed)
    return dataclasses.replace(sizes, device=device, dtype=dtype)


def build_linear_problem(family: Family, sizes: InstanceSizes) -> LinearTokenizedProblem:
    """The TLB instance of ``family`` (one whose class plays ``"linear"``) at ``sizes``.

    Raises:
        ValueError: ``family`` does not play the TLB, or a size, the device, the dtype or the
            memory is refused (:func:`checked_sizes`), or a value the family's class refuses.
        TypeError: the family's class does not build a :class:`LinearTokenizedProblem`.
    """
    check_choice("family", family_name(family), families_playing("linear"))
    problem = family.build(checked_sizes(sizes))
    if not isinstance(problem, LinearTokenizedProblem):
        raise TypeError(f"family {family_name(family)!r} builds {type(problem).__name__}, not a LinearTokenizedProblem")
    return problem


def build_multi_armed_problem(family: Family, sizes: InstanceSizes) -> TokenizedProblem:
    """The TMAB instance of ``family`` (one whose class plays ``"multi_armed"``) at ``sizes``, fixed query.

    A family with features is built over one query of one token and wrapped in
    :class:`StopValueProblem` (utility in [0, 1]); one without (``random_table``) is built as it
    is. ``sizes.num_queries`` and ``sizes.query_length`` are not read (both are 1).
    """
    check_choice("family", family_name(family), families_playing("multi_armed"))
    linear = issubclass(family.problem_class, LinearTokenizedProblem)
    one_query = dataclasses.replace(sizes, num_queries=1, query_length=1)
    # a family without features takes no embedding_dim (the memory bound counts one feature)
    checked = checked_sizes(one_query if linear else dataclasses.replace(one_query, embedding_dim=1))
    problem = family.build(checked)
    return StopValueProblem(cast(LinearTokenizedProblem, problem)) if linear else problem


def _split_keywords(keywords: dict[str, Any]) -> tuple[InstanceSizes, dict[str, Any]]:
    """``keywords`` as the :class:`InstanceSizes` its size fields make and the rest (the family's options)."""
    names = {field.name for field in dataclasses.fields(InstanceSizes)}
    sizes = InstanceSizes(**{name: value for name, value in keywords.items() if name in names})
    return sizes, {name: value for name, value in keywords.items() if name not in names}


def make_linear_problem(family: str, **keywords: Any) -> LinearTokenizedProblem:
    """A TLB instance of ``family`` (one of :data:`LINEAR_FAMILIES`) from keywords.

    ``keywords`` are every field of :class:`InstanceSizes` (each required) and the family's
    options (``alpha``, ``ddmc_violation``, ``needle_gap``, ``theta_norm``, ...); an option left
    as None takes the family's default, one given to a family that does not use it raises
    ``ValueError``. What :func:`build_linear_problem` builds from a family and sizes.
    """
    check_choice("family", family, families_playing("linear"))
    sizes, options = _split_keywords(keywords)
    return build_linear_problem(family_parameters(family, options), sizes)


def make_multi_armed_problem(family: str, **keywords: Any) -> TokenizedProblem:
    """A TMAB instance of ``family`` (one of :data:`MULTI_ARMED_FAMILIES`), fixed query, from keywords.

    ``keywords`` are the fields of :class:`InstanceSizes` but the pool's (``num_queries`` and
    ``query_length`` are 1) and the family's options, as for :func:`make_linear_problem`.
    """
    check_choice("family", family, families_playing("multi_armed"))
    sizes, options = _split_keywords({"num_queries": 1, "query_length": 1, **keywords})
    return build_multi_armed_problem(family_parameters(family, options), sizes)
