"""The frozen parts an LLM-backed instance is made of, and the config that composes them into a problem.

Each part is a frozen dataclass whose field names are the ``gym.make`` keywords (and the
:class:`~tokenized_bandit_gym.llm.language_model_problem.LanguageModelProblem` arguments) they hold, so a
keyword is found in one part by its name and every default is written once, here (an env kind whose
default differs sets its own part, e.g. the decoding env's ``Candidates(top_k=4)``):

- :class:`ModelSource`: where the model comes from and how it is loaded and run;
- :class:`QuerySource`: the query pool's source (a name, a path, a list) and where the queries sit in a file;
- :class:`Prompting`: how a query becomes the prompt (chat template, truncation);
- :class:`Reading`: how a response is read as a utility (``gamma``, ``v``, theta, the embedding ``e``);
- :class:`Candidates`: the actions of a step (the top-k, EOS);
- :class:`LengthRule`: L and where EOS is allowed.

:class:`LanguageModelProblemConfig` composes them with ``instance_seed``: what
:func:`~tokenized_bandit_gym.llm.make_language_model_problem.make_language_model_problem` builds a problem
from (the LLM envs' configs in :mod:`tokenized_bandit_gym.envs.language_model_config` make one).
:class:`ComposedConfig` is the one place flat keywords become a config of parts (``from_keywords``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from tokenized_bandit_gym.core.validation import MAX_SEED, check_choice, check_int, check_real
from tokenized_bandit_gym.llm.decoder_forward import FORWARD_IMPLEMENTATIONS
from tokenized_bandit_gym.llm.load_language_model import DEFAULT_MODEL
from tokenized_bandit_gym.llm.pre_norm import EMBEDDING_LAYERS
from tokenized_bandit_gym.llm.preference_theta import DEFAULT_FIELDS
from tokenized_bandit_gym.llm.value_map import VALUE_MAPS
from tokenized_bandit_gym.suggestions import did_you_mean

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

POOLING_SPANS = ("query_response", "response")
CANDIDATE_BATCHING = ("auto", "mask", "expand")
EMBEDDING_NORMS = ("l2", "none")
THETA_SCALES = ("unit", "literal")
"""The default theta's scale: ``0.5 * 1`` rescaled to unit norm, or the paper's literal ``0.5 * 1`` (norm sqrt(d)/2)."""
QUERY_TRUNCATIONS = ("none", "left")


def check_length_rule(fixed_length: bool, min_length: int | None, max_length: int) -> tuple[bool, int | None]:
    """``(fixed_length, min_length)`` checked against L: a bool, and None or an int in ``[1, L]``, not both set.

    Raises:
        TypeError: ``fixed_length`` not a bool, or ``min_length`` not an int.
        ValueError: ``min_length`` outside ``[1, L]``, or given with ``fixed_length=True``.
    """
    if not isinstance(fixed_length, bool):
        raise TypeError(f"fixed_length must be a bool, got {fixed_length!r}")
    if min_length is None:
        return fixed_length, None
    if fixed_length:
        raise ValueError(
            f"fixed_length=True already fixes every response at max_length={max_length}: "
            f"min_length={min_length!r} cannot be given with it (pass one or the other)"
        )
    return fixed_length, check_int("min_length", min_length, minimum=1, maximum=max_length)


THETA_NAMES = ("random", "hh-rlhf", "comparisons")
"""The named thetas (besides None, the paper's default, and a vector)."""

_Composed = TypeVar("_Composed", bound="ComposedConfig")


def _check_flags(part: object, *names: str) -> None:
    """Refuse a non-bool in the named fields of ``part``, naming the field."""
    for name in names:
        if not isinstance(getattr(part, name), bool):
            raise TypeError(f"{name} must be a bool, got {getattr(part, name)!r}")


@dataclass(frozen=True)
class ModelSource:
    """Where the model comes from, how it is loaded and how its forward runs.

    Attributes:
        model: hub name or local path (safetensors), or a loaded causal LM (then ``tokenizer`` too);
            default the shipped ``stories260K``.
        tokenizer: the tokenizer of a loaded ``model``; None when ``model`` is a name or path.
        dtype: weights' dtype when loading (``float32``, ``bfloat16``, ``float16``, ``float64``).
        device: torch device when loading.
        trust_remote_code: run model code from the hub.
        attn_implementation: the attention kernel when loading (``"auto"``: SDPA where supported, else eager).
        forward_implementation: ``"auto"``, ``"native"`` (Llama family, GPT-2) or ``"transformers"`` (any LM).
        candidate_batching: ``"auto"``, ``"mask"`` (4-D mask, eager/SDPA) or ``"expand"`` (any kernel).
    """

    model: str | os.PathLike[str] | PreTrainedModel = DEFAULT_MODEL
    tokenizer: PreTrainedTokenizerBase | None = None
    dtype: str | torch.dtype = "float32"
    device: str | torch.device = "cpu"
    trust_remote_code: bool = False
    attn_implementation: str = "auto"
    forward_implementation: str = "auto"
    candidate_batching: str = "auto"

    def __post_init__(self) -> None:
        _check_flags(self, "trust_remote_code")
        check_choice("forward_implementation", self.forward_implementation, FORWARD_IMPLEMENTATIONS)
        check_choice("candidate_batching", self.candidate_batching, CANDIDATE_BATCHING)


@dataclass(frozen=True)
class QuerySource:
    """Where the query pool comes from.

    Attributes:
        queries: a source (see :func:`~tokenized_bandit_gym.llm.query_sources.resolve_queries`): None
            (the story openings), ``"stories"``, ``"paper"``, ``"hf:<name>"``, a path, or the queries
            themselves (kept as a tuple of strings).
        query_column: the CSV column holding the queries (None: TruthfulQA's ``Question``).
        query_field: the JSONL field holding them, a dotted path (None: HH-RLHF's first human turn).
    """

    queries: str | os.PathLike[str] | Sequence[str] | None = None
    query_column: str | None = None
    query_field: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.queries, Sequence) and not isinstance(self.queries, str):
            object.__setattr__(self, "queries", tuple(self.queries))  # a list compares and hashes as its texts


@dataclass(frozen=True)
class Prompting:
    """How a query becomes the prompt.

    Attributes:
        chat_template: use the tokenizer's chat template (None: when it has one).
        query_truncation: ``"none"`` (a query + L beyond the model's positions raises) or ``"left"``.
    """

    chat_template: bool | None = None
    query_truncation: str = "none"

    def __post_init__(self) -> None:
        if self.chat_template is not None:
            _check_flags(self, "chat_template")
        check_choice("query_truncation", self.query_truncation, QUERY_TRUNCATIONS)


@dataclass(frozen=True)
class Reading:
    """How a response is read as a utility ``u = gamma * v(p) + (1 - gamma) * <theta, e>`` (paper section 5.1).

    Attributes:
        gamma: weight of ``v(p)`` in ``[0, 1]``.
        value_map: ``v``: ``logprob``, ``scaled_logprob``, ``root_prob`` or ``prob``.
        theta: None (the paper's ``0.5 * 1``, scaled as ``theta_scale`` says), ``"random"``, ``"hh-rlhf"``,
            ``"comparisons"`` or a ``(d,)`` vector (kept as a tuple of floats).
        theta_scale: the default theta's scale: ``"unit"`` (unit-normed) or ``"literal"`` (``0.5 * 1``).
        score_forced_eos: a forced EOS's ``log p`` (at position L) counts in ``v``.
        pooling: the span ``e`` mean-pools: ``"query_response"`` or ``"response"``.
        embedding_norm: ``"none"`` (the paper's raw mean-pooled state) or ``"l2"`` (unit norm).
        embedding_layer: ``"final_norm"`` (after the decoder's final norm) or ``"pre_norm"``.
        comparisons: with ``theta="comparisons"``, a ``.jsonl``(``.gz``) or ``.csv`` file of pairs.
        comparison_fields: the (chosen, rejected) field (JSONL) or column (CSV) names.
    """

    gamma: float = 0.8
    value_map: str = "logprob"
    theta: str | torch.Tensor | Sequence[float] | None = None
    theta_scale: str = "unit"
    score_forced_eos: bool = True
    pooling: str = "query_response"
    embedding_norm: str = "none"
    embedding_layer: str = "final_norm"
    comparisons: str | os.PathLike[str] | None = None
    comparison_fields: Sequence[str] = DEFAULT_FIELDS

    def __post_init__(self) -> None:
        check_real("gamma", self.gamma, low=0.0, high=1.0)
        check_choice("value_map", self.value_map, VALUE_MAPS)
        check_choice("theta_scale", self.theta_scale, THETA_SCALES)
        check_choice("pooling", self.pooling, POOLING_SPANS)
        check_choice("embedding_norm", self.embedding_norm, EMBEDDING_NORMS)
        check_choice("embedding_layer", self.embedding_layer, EMBEDDING_LAYERS)
        _check_flags(self, "score_forced_eos")
        if isinstance(self.theta, str):
            if self.theta not in THETA_NAMES:
                raise ValueError(
                    f"theta must be None, 'random', 'hh-rlhf', 'comparisons' or a vector, got {self.theta!r}"
                )
        elif self.theta is not None:
            vector = torch.as_tensor(self.theta, dtype=torch.float64)
            if vector.dim() == 1:  # a vector compares and hashes as its values (the problem checks its shape)
                object.__setattr__(self, "theta", tuple(vector.tolist()))
        object.__setattr__(self, "comparison_fields", tuple(self.comparison_fields))


@dataclass(frozen=True)
class Candidates:
    """The actions of a step.

    Attributes:
        top_k: k, the LM's top-k next tokens.
        eos_candidate: EOS is always a candidate (the k-th slot when not in the top-k).
    """

    top_k: int = 15
    eos_candidate: bool = True

    def __post_init__(self) -> None:
        check_int("top_k", self.top_k, minimum=1)
        _check_flags(self, "eos_candidate")


@dataclass(frozen=True)
class LengthRule:
    """L and where EOS is allowed.

    Attributes:
        max_length: L.
        fixed_length: EOS only at position L (the paper's setting).
        min_length: EOS only from position m on (with ``fixed_length=False``; ``1 <= m <= L``).
    """

    max_length: int = 30
    fixed_length: bool = True
    min_length: int | None = None

    def __post_init__(self) -> None:
        check_length_rule(self.fixed_length, self.min_length, check_int("max_length", self.max_length, minimum=1))


class ComposedConfig:
    """A frozen dataclass of parts (and plain fields) that flat keywords name field by field.

    A part is a field whose default is a dataclass; its fields are keywords of the composed config, as are
    the plain fields. :meth:`from_keywords` is the one place flat keywords become a config.
    """

    @classmethod
    def keyword_parts(cls) -> dict[str, str | None]:
        """Every keyword, in field order, with the part that holds it (None: a plain field of the config)."""
        defaults = cls()
        parts: dict[str, str | None] = {}
        for item in dataclasses.fields(cls):  # type: ignore[arg-type]
            value = getattr(defaults, item.name)
            names = [sub.name for sub in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else [None]
            for name in names:
                parts[item.name if name is None else name] = None if name is None else item.name
        return parts

    @classmethod
    def keyword_defaults(cls) -> dict[str, object]:
        """Every keyword with its default for this config class, in field order."""
        defaults = cls()
        return {
            name: getattr(defaults if part is None else getattr(defaults, part), name)
            for name, part in cls.keyword_parts().items()
        }

    @classmethod
    def keyword_types(cls) -> dict[str, str]:
        """Every keyword with its annotation (as written in its part), in field order."""
        defaults = cls()
        types: dict[str, str] = {}
        for name, part in cls.keyword_parts().items():
            holder: Any = defaults if part is None else getattr(defaults, part)  # a dataclass instance
            types[name] = str(next(item.type for item in dataclasses.fields(holder) if item.name == name))
        return types

    @classmethod
    def from_keywords(cls: type[_Composed], config: _Composed | None = None, /, **keywords: Any) -> _Composed:
        """The config ``gym.make``'s keywords describe: ``config`` (None: the defaults) with ``keywords`` changed.

        Raises:
            TypeError: ``config`` is not of this class, or a keyword is not one of its fields (the message
                suggests the closest).
            ValueError: a value a part refuses (the message names the keyword).
        """
        base = cls() if config is None else config
        if not isinstance(base, cls):
            raise TypeError(f"config must be a {cls.__name__}, got {type(base).__name__}")
        if not keywords:
            return base
        parts = cls.keyword_parts()
        changes: dict[str, dict[str, Any]] = {}
        plain: dict[str, Any] = {}
        for name, value in keywords.items():
            if name not in parts:
                raise TypeError(
                    f"{cls.__name__} got an unexpected keyword {name!r}{did_you_mean(name, parts)}; "
                    f"it takes {sorted(parts)} (and config)"
                )
            part = parts[name]
            if part is None:
                plain[name] = value
            else:
                changes.setdefault(part, {})[name] = value
        for part, values in changes.items():
            plain[part] = dataclasses.replace(getattr(base, part), **values)
        return dataclasses.replace(base, **plain)  # type: ignore[type-var]


def problem_argument_names() -> frozenset[str]:
    """The :class:`LanguageModelProblem` arguments a config's parts give by name (the rest are resolved first)."""
    from tokenized_bandit_gym.llm.language_model_problem import ARGUMENT_NAMES  # it reads its defaults here

    return ARGUMENT_NAMES - {"model", "tokenizer", "queries", "theta"}


@dataclass(frozen=True)
class LanguageModelProblemConfig:
    """Everything :func:`~tokenized_bandit_gym.llm.make_language_model_problem.make_language_model_problem` builds.

    No field has a default: an env kind's config composes it from its own parts (their defaults are the
    env's, :meth:`~tokenized_bandit_gym.envs.language_model_config.LanguageModelEnvConfig.problem_config`).

    Attributes:
        source: the model and how it is loaded and run.
        query_source: the query pool.
        prompting: how a query becomes the prompt.
        reading: the utility.
        candidates: the actions of a step.
        length: L and where EOS is allowed.
        instance_seed: seeds ``queries="paper"`` and ``theta="random"``.
        embeddings: compute ``e`` (False: ``u = v(p)`` alone, which needs ``gamma == 1``).
    """

    source: ModelSource
    query_source: QuerySource
    prompting: Prompting
    reading: Reading
    candidates: Candidates
    length: LengthRule
    instance_seed: int
    embeddings: bool

    def __post_init__(self) -> None:
        check_int("instance_seed", self.instance_seed, minimum=0, maximum=MAX_SEED)
        _check_flags(self, "embeddings")

    def problem_arguments(self) -> dict[str, Any]:
        """The :class:`LanguageModelProblem` arguments the parts hold (every one but model, tokenizer, queries, theta).

        Read by name from the parts, so every argument is given and the problem's own defaults never apply.
        """
        values = {"embeddings": self.embeddings}
        for part in (self.source, self.prompting, self.reading, self.candidates, self.length):
            values.update({item.name: getattr(part, item.name) for item in dataclasses.fields(part)})
        names = problem_argument_names()
        return {name: value for name, value in values.items() if name in names}
