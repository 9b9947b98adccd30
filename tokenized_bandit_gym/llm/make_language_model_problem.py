"""Build a :class:`LanguageModelProblem` from env keywords (model name or path, query source, theta)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from tokenized_bandit_gym.core.validation import MAX_SEED, check_device, check_int
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.load_language_model import load_language_model
from tokenized_bandit_gym.llm.preference_theta import (
    DEFAULT_FIELDS,
    HH_RLHF_COMPARISONS,
    Comparisons,
    preference_theta,
    read_comparisons,
)
from tokenized_bandit_gym.llm.query_sources import resolve_queries

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from tokenized_bandit_gym.llm.preference_theta import PreferenceFit


def make_language_model_problem(
    model: str | os.PathLike[str] | PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase | None = None,
    queries: str | os.PathLike[str] | Sequence[str] | None = None,
    theta: str | torch.Tensor | Sequence[float] | None = None,
    instance_seed: int = 0,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    trust_remote_code: bool = False,
    attn_implementation: str = "auto",
    query_column: str | None = None,
    query_field: str | None = None,
    comparisons: str | os.PathLike[str] | None = None,
    comparison_fields: Sequence[str] = DEFAULT_FIELDS,
    **problem_kwargs: Any,
) -> LanguageModelProblem:
    """Load the model (unless given loaded) and the queries, then build the problem.

    Args:
        model: hub name or local path, or a loaded causal LM (then ``tokenizer`` is required).
        tokenizer: the tokenizer of a loaded ``model``; None when ``model`` is a name or path.
        queries: a query source (see :func:`~tokenized_bandit_gym.llm.query_sources.resolve_queries`).
        theta: None (the paper's ``0.5 * 1``, unit-normed), ``"random"`` (a unit Gaussian
            direction drawn from ``instance_seed``), ``"hh-rlhf"`` (Bradley-Terry on the shipped
            HH-RLHF pairs, :mod:`~tokenized_bandit_gym.llm.preference_theta`), ``"comparisons"``
            (Bradley-Terry on the ``comparisons`` file) or a ``(d,)`` vector.
        instance_seed: seeds the paper's query generator and ``theta="random"``.
        dtype: weight dtype when loading.
        device: torch device when loading.
        trust_remote_code: passed to transformers when loading.
        attn_implementation: the attention kernel when loading (see
            :func:`~tokenized_bandit_gym.llm.load_language_model.load_language_model`); a loaded
            ``model`` keeps its own, so only ``"auto"`` goes with one.
        query_column: the CSV column holding the queries (see
            :func:`~tokenized_bandit_gym.llm.query_sources.resolve_queries`).
        query_field: the JSONL field holding the queries, a dotted path for nested objects.
        comparisons: with ``theta="comparisons"``, a ``.jsonl``/``.jsonl.gz``/``.csv`` file of pairs.
        comparison_fields: the (chosen, rejected) field or column names of ``comparisons``.
        **problem_kwargs: the remaining :class:`LanguageModelProblem` arguments.
    """
    seed = check_int("instance_seed", instance_seed, minimum=0, maximum=MAX_SEED)
    if not isinstance(model, (str, os.PathLike, torch.nn.Module)):
        kind = type(model).__name__
        raise TypeError(f"model must be a hub name, a local path or a loaded causal LM, got {model!r} ({kind})")
    if isinstance(model, (str, os.PathLike)):
        if tokenizer is not None:
            raise ValueError("pass tokenizer= only with a loaded model, not with a model name or path")
        language_model, tokenizer = load_language_model(
            model, dtype, check_device(device), trust_remote_code, attn_implementation
        )
    else:
        if tokenizer is None:
            raise ValueError("a loaded model needs its tokenizer= as well")
        if attn_implementation != "auto":
            raise ValueError(
                f"attn_implementation={attn_implementation!r} applies when the model is loaded by name or path; "
                "a loaded model keeps the kernel it was loaded with"
            )
        language_model = model
    texts = resolve_queries(queries, seed, query_column=query_column, query_field=query_field)
    preference_data = _preference_data(theta, comparisons, comparison_fields)
    latent: torch.Tensor | Sequence[float] | None = None
    if isinstance(theta, str) and preference_data is None:
        if theta != "random":
            raise ValueError(f"theta must be None, 'random', 'hh-rlhf', 'comparisons' or a vector, got {theta!r}")
        hidden = int(language_model.get_output_embeddings().weight.shape[1])
        generator = torch.Generator().manual_seed(seed)
        direction = torch.randn(hidden, generator=generator, dtype=torch.float64)
        latent = direction / direction.norm()
    elif not isinstance(theta, str):
        latent = theta
    if isinstance(model, torch.nn.Module):  # passed in loaded: nothing to rebuild it from, so no recipe
        problem = LanguageModelProblem(language_model, tokenizer, texts, theta=latent, **problem_kwargs)
    else:
        recipe = LanguageModelRecipe(
            model, dtype, device, trust_remote_code, attn_implementation, texts, latent, dict(problem_kwargs)
        )
        problem = recipe.build_with(language_model, tokenizer)
    if isinstance(theta, str) and theta == "random":
        problem.theta_source = f"a random unit direction (instance_seed={seed})"
    if preference_data is not None:
        if problem.pooling != "query_response":
            raise ValueError(f"theta={theta!r} is fitted on whole texts and needs pooling='query_response'")
        fit = preference_theta(problem, preference_data, seed=seed)
        problem.latent_theta = fit.theta.to(problem.device)
        problem.preference_fit = fit
        problem.theta_source = fit.describe()
    if problem.recipe is not None:  # a copy rebuilds with the resolved theta and says where it came from
        problem.recipe = replace(
            problem.recipe,
            theta=problem.latent_theta.detach().cpu() if preference_data is not None else problem.recipe.theta,
            theta_source=problem.theta_source,
            preference_fit=problem.preference_fit,
        )
    return problem


def _preference_data(
    theta: object, comparisons: str | os.PathLike[str] | None, fields: Sequence[str]
) -> Comparisons | None:
    """The comparisons ``theta`` is fitted on (``"hh-rlhf"`` or ``"comparisons"``), else None."""
    name = theta if isinstance(theta, str) else None
    if name == "comparisons":
        if comparisons is None:
            raise ValueError("theta='comparisons' needs comparisons= (a .jsonl, .jsonl.gz or .csv file of pairs)")
        return read_comparisons(comparisons, fields)
    if comparisons is not None:
        raise ValueError(f"comparisons= goes with theta='comparisons', got theta={theta!r}")
    if name == "hh-rlhf":
        if not HH_RLHF_COMPARISONS.is_file():
            raise ValueError(f"the shipped HH-RLHF pairs are missing from the package ({HH_RLHF_COMPARISONS})")
        return read_comparisons(HH_RLHF_COMPARISONS)
    return None


@dataclass(frozen=True)
class LanguageModelRecipe:
    """What rebuilds a :class:`LanguageModelProblem` over a model loaded by name or path: never its weights.

    A problem pickles (and deep-copies) as its recipe, so an LLM env travels to a worker process
    as a few strings and small tensors, and the worker loads the model itself (once per process:
    :func:`~tokenized_bandit_gym.llm.load_language_model.load_language_model` caches it).

    Attributes:
        model: the hub name or local path the model was loaded from.
        dtype: the weights' dtype when loading.
        device: the torch device when loading.
        trust_remote_code: as passed to transformers.
        attn_implementation: the attention kernel asked for when loading.
        queries: the resolved query pool (the texts, so no query file or dataset is read again).
        theta: the latent ``theta`` ``(d,)`` as resolved (None: the paper's default).
        problem_kwargs: the remaining :class:`LanguageModelProblem` arguments.
        theta_source: where ``theta`` came from (the problem's ``theta_source``; None: as the problem says).
        preference_fit: the Bradley-Terry fit ``theta`` came from, when it did (the problem's ``preference_fit``).
    """

    model: str | os.PathLike[str]
    dtype: str | torch.dtype
    device: str | torch.device
    trust_remote_code: bool
    attn_implementation: str
    queries: list[str]
    theta: torch.Tensor | Sequence[float] | None
    problem_kwargs: dict[str, Any] = field(default_factory=dict)
    theta_source: str | None = None
    preference_fit: PreferenceFit | None = None

    def build(self) -> LanguageModelProblem:
        """Load the model (or take it from the loader's cache) and build the problem."""
        language_model, tokenizer = load_language_model(
            self.model, self.dtype, check_device(self.device), self.trust_remote_code, self.attn_implementation
        )
        return self.build_with(language_model, tokenizer)

    def build_with(self, language_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> LanguageModelProblem:
        """The problem over ``language_model`` (loaded from this recipe), remembering the recipe."""
        problem = LanguageModelProblem(language_model, tokenizer, self.queries, theta=self.theta, **self.problem_kwargs)
        problem.recipe = self
        if self.theta_source is not None:
            problem.theta_source = self.theta_source
        problem.preference_fit = self.preference_fit
        return problem
