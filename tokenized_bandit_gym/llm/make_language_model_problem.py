"""Build a :class:`LanguageModelProblem` from its config (model name or path, query source, theta)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from tokenized_bandit_gym.core.validation import check_device
from tokenized_bandit_gym.llm.language_model_config import LanguageModelProblemConfig, ModelSource, QuerySource
from tokenized_bandit_gym.llm.language_model_problem import LanguageModelProblem
from tokenized_bandit_gym.llm.load_language_model import load_language_model
from tokenized_bandit_gym.llm.preference_theta import (
    HH_RLHF_COMPARISONS,
    Comparisons,
    preference_theta,
    read_comparisons,
)
from tokenized_bandit_gym.llm.query_sources import resolve_queries

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from tokenized_bandit_gym.llm.preference_theta import PreferenceFit


def make_language_model_problem(config: LanguageModelProblemConfig) -> LanguageModelProblem:
    """Load the model (unless ``config.source`` holds it loaded) and the queries, resolve theta, build the problem.

    Args:
        config: the problem's parts (a
            :class:`~tokenized_bandit_gym.llm.language_model_config.LanguageModelProblemConfig`): the model
            source (a hub name or local path, or a loaded causal LM with its ``tokenizer``; a loaded model
            keeps its own attention kernel, so only ``attn_implementation="auto"`` goes with one), the query
            source (:func:`~tokenized_bandit_gym.llm.query_sources.resolve_queries`), the reading (theta:
            None, the paper's ``0.5 * 1``; ``"random"``, a unit Gaussian direction drawn from
            ``instance_seed``; ``"hh-rlhf"`` or ``"comparisons"``, Bradley-Terry on the shipped HH-RLHF
            pairs or on the ``comparisons`` file, :mod:`~tokenized_bandit_gym.llm.preference_theta`; or a
            ``(d,)`` vector), the candidates, the length rule and the prompting.

    Raises:
        TypeError: ``model`` is neither a name, a path nor a loaded model.
        ValueError: a tokenizer without a loaded model (or none with one), ``attn_implementation`` set for a
            loaded model, ``comparisons`` without ``theta="comparisons"`` (or the reverse), or what the
            problem refuses.
    """
    source, reading = config.source, config.reading
    seed = config.instance_seed
    model, tokenizer = source.model, source.tokenizer
    if not isinstance(model, (str, os.PathLike, torch.nn.Module)):
        kind = type(model).__name__
        raise TypeError(f"model must be a hub name, a local path or a loaded causal LM, got {model!r} ({kind})")
    if isinstance(model, (str, os.PathLike)):
        if tokenizer is not None:
            raise ValueError("pass tokenizer= only with a loaded model, not with a model name or path")
        language_model, tokenizer = load_source(source)
    else:
        if tokenizer is None:
            raise ValueError("a loaded model needs its tokenizer= as well")
        if source.attn_implementation != "auto":
            raise ValueError(
                f"attn_implementation={source.attn_implementation!r} applies when the model is loaded by name or "
                "path; a loaded model keeps the kernel it was loaded with"
            )
        language_model = model
    queries = config.query_source
    texts = resolve_queries(queries.queries, seed, query_column=queries.query_column, query_field=queries.query_field)
    theta = reading.theta
    random_theta = isinstance(theta, str) and theta == "random"
    preference_data = _preference_data(theta, reading.comparisons, reading.comparison_fields)
    latent: torch.Tensor | Sequence[float] | None = None
    if random_theta:
        hidden = int(language_model.get_output_embeddings().weight.shape[1])
        generator = torch.Generator().manual_seed(seed)
        direction = torch.randn(hidden, generator=generator, dtype=torch.float64)
        latent = direction / direction.norm()
    elif not isinstance(theta, str):
        latent = theta
    if isinstance(model, torch.nn.Module):  # passed in loaded: nothing to rebuild it from, so no recipe
        problem = LanguageModelProblem(language_model, tokenizer, texts, theta=latent, **config.problem_arguments())
    else:
        resolved = replace(
            config,
            query_source=QuerySource(tuple(texts)),
            reading=replace(reading, theta=latent, comparisons=None),
        )
        problem = LanguageModelRecipe(resolved).build_with(language_model, tokenizer)
    if random_theta:
        problem.theta_source = f"a random unit direction (instance_seed={seed})"
    if preference_data is not None:
        if problem.pooling != "query_response":
            raise ValueError(f"theta={theta!r} is fitted on whole texts and needs pooling='query_response'")
        fit = preference_theta(problem, preference_data, seed=seed)
        problem.latent_theta = fit.theta.to(problem.device)
        problem.preference_fit = fit
        problem.theta_source = fit.describe()
    if problem.recipe is not None:  # a copy rebuilds with the resolved theta and says where it came from
        fitted = problem.latent_theta.detach().cpu() if preference_data is not None else problem.recipe.theta
        rebuilt = replace(problem.recipe.config, reading=replace(problem.recipe.config.reading, theta=fitted))
        problem.recipe = LanguageModelRecipe(rebuilt, problem.theta_source, problem.preference_fit)
    return problem


def load_source(source: ModelSource) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer ``source`` names, loaded (or taken from the loader's cache)."""
    if not isinstance(source.model, (str, os.PathLike)):
        raise TypeError(f"only a model named by hub name or path is loaded, got {type(source.model).__name__}")
    return load_language_model(
        source.model, source.dtype, check_device(source.device), source.trust_remote_code, source.attn_implementation
    )


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
        config: the problem's config as resolved: the query source is the query pool's texts (so no query file
            or dataset is read again) and the reading's theta the latent ``theta`` ``(d,)`` (None: the paper's
            default), with no comparisons left to fit.
        theta_source: where ``theta`` came from (the problem's ``theta_source``; None: as the problem says).
        preference_fit: the Bradley-Terry fit ``theta`` came from, when it did (the problem's ``preference_fit``).
    """

    config: LanguageModelProblemConfig
    theta_source: str | None = None
    preference_fit: PreferenceFit | None = None

    @property
    def queries(self) -> list[str]:
        """The resolved query pool."""
        queries = self.config.query_source.queries
        if not isinstance(queries, tuple):
            raise TypeError(f"a recipe holds the resolved query texts, got {queries!r}")
        return list(queries)

    @property
    def theta(self) -> torch.Tensor | Sequence[float] | None:
        """The latent theta as resolved (None: the paper's default)."""
        theta = self.config.reading.theta
        return None if isinstance(theta, str) else theta

    def build(self) -> LanguageModelProblem:
        """Load the model (or take it from the loader's cache) and build the problem."""
        return self.build_with(*load_source(self.config.source))

    def build_with(self, language_model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> LanguageModelProblem:
        """The problem over ``language_model`` (loaded from this recipe), remembering the recipe."""
        problem = LanguageModelProblem(
            language_model, tokenizer, self.queries, theta=self.theta, **self.config.problem_arguments()
        )
        problem.recipe = self
        if self.theta_source is not None:
            problem.theta_source = self.theta_source
        problem.preference_fit = self.preference_fit
        return problem
