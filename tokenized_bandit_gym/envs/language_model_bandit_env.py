"""The Gymnasium shell shared by the LLM-backed envs (a batch of one over the LLM core)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.envs.env_contract import (
    check_action,
    check_render_mode,
    observation_row,
    observation_space,
    round_start_info,
    start_round_streams,
    step_reward_and_info,
    summary_row,
    token_image,
)
from tokenized_bandit_gym.envs.language_model_config import LanguageModelEnvConfig
from tokenized_bandit_gym.envs.language_model_round_batch import LanguageModelRoundBatch
from tokenized_bandit_gym.envs.pairwise_feedback import PairwiseRound
from tokenized_bandit_gym.llm.make_language_model_problem import make_language_model_problem

Observation = dict[str, np.ndarray | np.int64]
BENCHMARK_UPPER_BOUND = False
"""``info["benchmark_upper_bound"]`` of every LLM env, from reset on: greedy decoding and beam search with the
true utility are benchmarks, not the optimum, so an agent can beat them (negative regret). With free lengths
(``fixed_length=False``) even a degenerate policy can: ``v(p)`` favours short responses."""


class LanguageModelBanditEnv(gym.Env[Observation, np.int64]):
    """One round is one episode: answer the drawn query token by token among the LM's top-k.

    Subclasses name their config class (:attr:`config_class`, a
    :class:`~tokenized_bandit_gym.envs.language_model_config.LanguageModelEnvConfig`) and document their
    keywords; this constructor turns the keywords into the config (in one place,
    :meth:`~tokenized_bandit_gym.llm.language_model_config.ComposedConfig.from_keywords`), builds the
    :class:`LanguageModelProblem` from it (:func:`make_language_model_problem`) and plays it. Same dynamics,
    streams, noise and action checks as the synthetic shell (``validate_action``, :class:`RoundStreams`,
    :class:`NoiseModel`); the action is an index into the k candidates.

    Args:
        config: the env's configuration (None: the kind's defaults); the keywords change it.
        render_mode: None, ``"ansi"`` (text) or ``"rgb_array"`` (one coloured cell per token: the
            query on the top row, the response below; what SB3's ``make_vec_env`` asks for).
        **keywords: the config's fields by name (``model``, ``top_k``, ``noise_scale``, ``feedback``, ...: the
            fields of its parts, listed in the env's docstring). ``feedback="pairwise"`` plays two responses a
            round with the Bradley-Terry preference bit as reward
            (:mod:`~tokenized_bandit_gym.envs.pairwise_feedback`).

    Attributes:
        config: the frozen config the env was made from.
        problem: the instance it built (its recipe, what pickling carries, holds the config's problem part).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    observation_space: spaces.Dict  # type: ignore[assignment]  # gymnasium types Dict as Space[dict[str, Space]]
    action_space: spaces.Discrete
    benchmark_upper_bound = BENCHMARK_UPPER_BOUND
    config_class: ClassVar[type[LanguageModelEnvConfig]]

    def __init__(
        self, config: LanguageModelEnvConfig | None = None, render_mode: str | None = None, **keywords: Any
    ) -> None:
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        config = self.config_class.from_keywords(config, **keywords)  # refused before the model loads
        self.problem = problem = make_language_model_problem(config.problem_config())
        self.config = config  # after the problem: pickling a loaded model's env fails on the problem, saying why
        rewards = config.rewards
        self.feedback_channel = rewards.feedback_channel()
        self.feedback = self.feedback_channel.kind
        self.noise_model = self.feedback_channel.noise_model(rewards.noise, rewards.noise_scale)
        self.optimal_kind = rewards.optimal_kind
        self.beam_width = rewards.beam_width
        self.strict_actions = rewards.strict_actions
        self.observe_features = config.observe_features and problem.embeddings
        self.observe_logprobs = config.observe_logprobs
        n, length, k = problem.vocab_size, problem.max_length, problem.num_candidates
        features = None
        if self.observe_features:
            bound = 1.0 if problem.embedding_norm == "l2" else math.inf
            low_v, high_v = problem.value_map.bounds
            low = np.concatenate([np.full(problem.hidden_size, -bound), [low_v]]).astype(np.float32)
            high = np.concatenate([np.full(problem.hidden_size, bound), [high_v]]).astype(np.float32)
            features = spaces.Box(
                np.tile(low, (k, 1)), np.tile(high, (k, 1)), shape=(k, problem.hidden_size + 1), dtype=np.float32
            )
        self.observation_space = observation_space(
            vocab_size=n,
            query_width=int(problem.query_tokens.shape[1]),
            max_length=length,
            num_candidates=k,
            candidate_embeddings=features,
            candidate_logprobs=self.observe_logprobs,
            pairwise=self.feedback_channel.pairwise,
        )
        self.action_space = spaces.Discrete(k)
        self.rounds = self.round_batch(1, cache_initial_states=False)  # B = 1: the one round
        self._streams: RoundStreams | None = None
        self._mask = np.zeros(k, dtype=bool)  # (k,) the allowed candidates now, on the host
        self._noise = 0.0
        self._query = 0
        self._pairwise: PairwiseRound | None = None
        if self.feedback_channel.pairwise:
            self._pairwise = PairwiseRound(length, problem.eos_token_id, self.feedback_channel.temperature)

    @property
    def eos_token_id(self) -> int:
        """The EOS token id (a token id, not an action: see ``candidate_tokens``)."""
        return self.problem.eos_token_id

    def round_batch(
        self, num_rows: int, host: bool = True, cache_initial_states: bool = False
    ) -> LanguageModelRoundBatch:
        """A round batch of ``num_rows`` rounds of this env's instance and settings.

        What this env (B = 1), the native vector env and the PettingZoo arena step; its rows are
        tensors on the model's device whatever ``host`` says.

        Args:
            num_rows: B.
            host: unused (the LLM's state lives on its device).
            cache_initial_states: keep the initial state of every query of the pool.
        """
        batch = LanguageModelRoundBatch(
            self.problem,
            num_rows,
            optimal_kind=self.optimal_kind,
            beam_width=self.beam_width,
            feature_space=cast("spaces.Box | None", self.observation_space.spaces.get("candidate_embeddings")),
            observe_logprobs=self.observe_logprobs,
            cache_initial_states=cache_initial_states,
        )
        batch.info_schema = replace(batch.info_schema, pairwise=self.feedback_channel.pairwise)
        return batch

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start a round: draw the query x_t and the round's noise from their own streams.

        ``seed`` reseeds both streams (never the instance, which the constructor fixes): a non-negative integer,
        NumPy integers included (:func:`~tokenized_bandit_gym.core.validation.check_reset_seed`).

        Raises:
            TypeError: ``seed`` is a bool or not an integer.
            ValueError: ``seed`` is negative.
        """
        self._streams, self._query, self._noise = start_round_streams(
            self, self._streams, seed, self.problem.num_queries, self.noise_model
        )
        device = self.problem.device
        self.rounds.restart(
            None,  # the one row
            torch.tensor([self._query], dtype=torch.int64, device=device),
            torch.tensor([self._noise], dtype=torch.float64, device=device),
        )
        if self._pairwise is not None:
            self._pairwise.start()
        info = round_start_info(self._query, self.rounds.info_schema)
        info["benchmark_upper_bound"] = BENCHMARK_UPPER_BOUND
        return self._observe(), info

    def step(self, action: object) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Append the chosen candidate; the reward is 0 until the response is complete.

        Raises:
            ValueError: before :meth:`reset`, after the episode ended, for an out-of-range or
                NaN action, or a masked action (except the documented forced EOS at position L).
            TypeError: a non-integer action.
        """
        rounds = self.rounds
        if rounds.state is None:
            raise ValueError("step() called before reset(): call reset() to start a round")
        if bool(rounds.finished[0]):
            raise ValueError("step() called after the episode ended: call reset() to start a new round")
        length = int(rounds.lengths[0])
        index, forced_eos = check_action(action, self._mask, length, self.problem.max_length, self.strict_actions)
        rounds.advance(torch.tensor([index], dtype=torch.int64, device=self.problem.device), None)
        terminated = bool(rounds.finished[0])
        summary = summary_row(rounds.round_summary(rounds.finished), 0) if terminated else None
        pairwise = self._pairwise
        if pairwise is None or summary is None:
            reward, info = step_reward_and_info(self._query, forced_eos, summary, self._noise, rounds.info_schema)
        elif not pairwise.deciding_second:  # the first response is complete: the second starts on the same query
            pairwise.keep_first(summary)
            rounds.restart(None, rounds.state.queries.clone(), rounds.noise.clone())
            terminated = False
            reward, info = step_reward_and_info(self._query, forced_eos, None, self._noise, rounds.info_schema)
        else:
            reward, summary = pairwise.finish(summary, self._noise)
            info = step_reward_and_info(self._query, forced_eos, summary, self._noise, rounds.info_schema)[1]
        info["benchmark_upper_bound"] = BENCHMARK_UPPER_BOUND
        return self._observe(), reward, terminated, False, info

    def response_text(self, response: np.ndarray | torch.Tensor | Sequence[int]) -> str:
        """The text of a response's token ids (``info["response"]``, ``(L,)``; its fill value gives ``""``).

        Text is not an info entry (no strings in info): this decodes what the info holds.
        """
        tokens = [int(token) for token in np.asarray(response).reshape(-1) if token >= 0]
        return self.problem.decode(tokens)

    def action_masks(self) -> np.ndarray:
        """Allowed actions now, ``(k,)`` bool (sb3-contrib's MaskablePPO reads this)."""
        return self._mask.copy()

    def render(self) -> str | np.ndarray | None:
        """The query and the response so far: text (``"ansi"``) or an image (``"rgb_array"``, see ``token_image``)."""
        state = self.rounds.state
        if self.render_mode is None or state is None:
            return None
        length = int(state.lengths[0])
        if self.render_mode == "ansi":
            response = self.problem.decode(state.tokens[0, :length])
            return f"{self.problem.query_texts[self._query]!r} -> {response!r}"
        query = self.problem.query_tokens[self._query, : int(self.problem.query_lengths[self._query])].tolist()
        width = max(int(self.problem.query_tokens.shape[1]), self.problem.max_length)
        return token_image([query, state.tokens[0, :length].tolist()], self.eos_token_id, width)

    def _observe(self) -> Observation:
        """The round's observation (row 0 of the batch's); caches the mask on the host."""
        observed = observation_row(self.rounds.observe(), 0)
        if self._pairwise is not None:
            observed = self._pairwise.observation(observed)
        self._mask = observed["action_mask"].astype(bool)
        return observed
