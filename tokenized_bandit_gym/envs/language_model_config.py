"""The frozen configurations of the LLM envs: ``TokenizedAlignment-v*`` and ``TokenizedDecoding-v0``.

As the synthetic envs' (:mod:`~tokenized_bandit_gym.envs.synthetic_config`), one value holds what an LLM env
is made of, composed of its parts (:mod:`~tokenized_bandit_gym.llm.language_model_config`: the model source,
the queries, the prompting, the reading, the candidates, the length rule; here the rewards). Every default is
written once, in a part or in the env kind's config; ``gym.make``'s flat keywords become a config in one
place (:meth:`~tokenized_bandit_gym.llm.language_model_config.ComposedConfig.from_keywords`: an unknown name
is refused with the closest suggested, a bad value with a ValueError naming it). The single env keeps it
(``env.unwrapped.config``), the native vector env takes it (``gym.make_vec(id, N, config=...)``), and the
problem's recipe (what pickling carries) holds its problem part
(:meth:`TokenizedAlignmentConfig.problem_config`). Adding an LLM option is one field in its part plus its use.

>>> import gymnasium as gym
>>> import tokenized_bandit_gym
>>> from tokenized_bandit_gym.envs.language_model_config import TokenizedAlignmentConfig
>>> config = TokenizedAlignmentConfig.from_keywords(max_length=4, top_k=3, pooling="response")
>>> config.length.max_length, config.reading.pooling
(4, 'response')
>>> env = gym.make("TokenizedAlignment-v0", config=config)
>>> env.unwrapped.config == config, env.unwrapped.problem.pooling
(True, 'response')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenized_bandit_gym.core.noise_model import NoiseModel
from tokenized_bandit_gym.core.validation import MAX_SEED, check_choice, check_int
from tokenized_bandit_gym.envs.pairwise_feedback import FeedbackChannel
from tokenized_bandit_gym.llm.language_model_config import (
    Candidates,
    ComposedConfig,
    LanguageModelProblemConfig,
    LengthRule,
    ModelSource,
    Prompting,
    QuerySource,
    Reading,
)
from tokenized_bandit_gym.llm.query_sources import STORY_OPENINGS

OPTIMAL_KINDS = ("oracle_greedy", "oracle_beam")
"""The benchmarks ``optimal_utility`` can be: greedy decoding with the true utility, or the better of a beam
search and greedy."""


@dataclass(frozen=True)
class Rewards:
    """The reward noise, the benchmark regret is measured against, and the action check.

    Attributes:
        noise: ``"gaussian"`` or ``"bounded"``.
        noise_scale: sigma >= 0.
        optimal_kind: ``"oracle_greedy"`` or ``"oracle_beam"``.
        beam_width: the beam's width for ``"oracle_beam"``.
        strict_actions: raise on a masked action instead of the forced EOS at position L.
    """

    noise: str = NoiseModel.kind
    noise_scale: float = NoiseModel.scale
    optimal_kind: str = "oracle_greedy"
    beam_width: int = 4
    strict_actions: bool = False

    def __post_init__(self) -> None:
        self.feedback_channel().noise_model(self.noise, self.noise_scale)
        check_choice("optimal_kind", self.optimal_kind, OPTIMAL_KINDS)
        check_int("beam_width", self.beam_width, minimum=1)
        if not isinstance(self.strict_actions, bool):
            raise TypeError(f"strict_actions must be a bool, got {self.strict_actions!r}")

    def feedback_channel(self) -> FeedbackChannel:
        """Scalar rewards (:class:`Feedback` adds the pairwise channel)."""
        return FeedbackChannel()


@dataclass(frozen=True)
class Feedback(Rewards):
    """:class:`Rewards` and the feedback channel.

    Attributes:
        feedback: ``"scalar"`` or ``"pairwise"`` (two responses a round, reward a comparison).
        preference_temperature: tau > 0 of the Bradley-Terry comparison (pairwise).
    """

    feedback: str = FeedbackChannel.kind
    preference_temperature: float = FeedbackChannel.temperature

    def feedback_channel(self) -> FeedbackChannel:
        """The validated channel of ``feedback`` and ``preference_temperature``."""
        return FeedbackChannel(self.feedback, self.preference_temperature)


@dataclass(frozen=True)
class LanguageModelEnvConfig(ComposedConfig):
    """What every LLM env kind is made of; a kind's subclass adds its parts and sets its defaults.

    Attributes:
        source: the model and how it is loaded and run.
        prompting: how a query becomes the prompt.
        candidates: the actions of a step.
        length: L and where EOS is allowed.
        rewards: noise, the benchmark, the action check (and, for alignment, the feedback channel).
        instance_seed: fixes the instance (``queries="paper"``, ``theta="random"``).
    """

    source: ModelSource = field(default_factory=ModelSource)
    prompting: Prompting = field(default_factory=Prompting)
    candidates: Candidates = field(default_factory=Candidates)
    length: LengthRule = field(default_factory=LengthRule)
    rewards: Rewards = field(default_factory=Rewards)
    instance_seed: int = 0

    observe_features = True
    """Whether the observation holds ``candidate_embeddings`` (a class attribute: no keyword sets it)."""
    observe_logprobs = True
    """Whether the observation holds ``candidate_logprobs`` (the decoding config makes it a field)."""

    def __post_init__(self) -> None:
        if type(self) is LanguageModelEnvConfig:
            raise TypeError(
                "LanguageModelEnvConfig is the LLM kinds' base: use TokenizedAlignmentConfig or TokenizedDecodingConfig"
            )
        check_int("instance_seed", self.instance_seed, minimum=0, maximum=MAX_SEED)

    def problem_config(self) -> LanguageModelProblemConfig:
        """The problem's config (what :func:`make_language_model_problem` builds and the recipe holds)."""
        raise NotImplementedError(f"{type(self).__name__} is not an LLM env kind's config")


@dataclass(frozen=True)
class TokenizedAlignmentConfig(LanguageModelEnvConfig):
    """The configuration of ``TokenizedAlignment-v0`` (and, with its reading, ``-v1``): section 5.1's alignment.

    Attributes (besides :class:`LanguageModelEnvConfig`'s):
        query_source: the query pool.
        reading: the utility ``gamma * v(p) + (1 - gamma) * <theta, e>``.
        rewards: a :class:`Feedback` (scalar or pairwise).
    """

    query_source: QuerySource = field(default_factory=QuerySource)
    reading: Reading = field(default_factory=Reading)
    rewards: Feedback = field(default_factory=Feedback)

    def problem_config(self) -> LanguageModelProblemConfig:
        """The problem's parts, ``e`` computed."""
        return LanguageModelProblemConfig(
            self.source,
            self.query_source,
            self.prompting,
            self.reading,
            self.candidates,
            self.length,
            self.instance_seed,
            embeddings=True,
        )


@dataclass(frozen=True)
class TokenizedDecodingConfig(LanguageModelEnvConfig):
    """The configuration of ``TokenizedDecoding-v0``: section 2's decoding, ``u = v(p)`` on one fixed query.

    Attributes (besides :class:`LanguageModelEnvConfig`'s, with its own defaults: k = 4, L = 8, the beam
    benchmark of width 8):
        query: the fixed query.
        value_map: ``v``: ``root_prob`` (``p ** (1 / L)``), ``prob``, ``logprob`` or ``scaled_logprob``.
        observe_logprobs: add ``candidate_logprobs`` to the observation.
    """

    candidates: Candidates = field(default_factory=lambda: Candidates(top_k=4))
    length: LengthRule = field(default_factory=lambda: LengthRule(max_length=8))
    rewards: Rewards = field(default_factory=lambda: Rewards(optimal_kind="oracle_beam", beam_width=8))
    query: str = STORY_OPENINGS[0]
    value_map: str = "root_prob"
    observe_logprobs: bool = False

    observe_features = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.query, str) or not self.query.strip():
            raise ValueError(f"query must be a non-empty string, got {self.query!r}")
        if not isinstance(self.observe_logprobs, bool):
            raise TypeError(f"observe_logprobs must be a bool, got {self.observe_logprobs!r}")
        Reading(gamma=1.0, value_map=self.value_map)  # refuses a bad value_map here, before the model loads

    def problem_config(self) -> LanguageModelProblemConfig:
        """The problem's parts: the one query, ``u = v(p)`` (``gamma = 1``, no ``e``)."""
        return LanguageModelProblemConfig(
            self.source,
            QuerySource([self.query]),
            self.prompting,
            Reading(gamma=1.0, value_map=self.value_map),
            self.candidates,
            self.length,
            self.instance_seed,
            embeddings=False,
        )
