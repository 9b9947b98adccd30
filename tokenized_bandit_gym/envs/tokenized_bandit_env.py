"""The Gymnasium shell shared by every tokenized bandit environment (a batch of one)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.envs.env_contract import (
    check_action,
    check_render_mode,
    observation_space,
    round_start_info,
    start_round_streams,
    step_reward_and_info,
    token_image,
)
from tokenized_bandit_gym.envs.pairwise_feedback import PairwiseRound
from tokenized_bandit_gym.envs.round_batch import DeviceRoundBatch, HostRoundBatch, RoundBatch, SingleRoundBatch
from tokenized_bandit_gym.envs.synthetic_config import SyntheticBanditConfig

Observation = dict[str, np.ndarray | np.int64]


class TokenizedBanditEnv(gym.Env[Observation, np.int64]):
    """One round of a tokenized bandit is one episode; see :mod:`tokenized_bandit_gym.envs`.

    Subclasses name their config class (:attr:`config_class`, a
    :class:`~tokenized_bandit_gym.envs.synthetic_config.SyntheticBanditConfig`) and document their
    keywords; this constructor turns the keywords into the config (in one place,
    :meth:`~tokenized_bandit_gym.envs.synthetic_config.SyntheticBanditConfig.from_keywords`) and
    builds the instance from it. The candidates of a synthetic env are the whole vocabulary
    (k = n), so an action is a token id.

    Args:
        config: the env's configuration (None: the kind's defaults); the keywords change it.
        render_mode: None, ``"ansi"`` (text) or ``"rgb_array"`` (one coloured cell per token:
            the query on the top row, the response below; what SB3's ``make_vec_env`` asks for).
        **keywords: the config's fields by name (``vocab_size``, ``noise``, ``strict_actions``,
            ...), ``family`` by its name, and the family's own options (``alpha``, ``theta_norm``, ...).
            ``strict_actions`` raises on a masked action instead of the forced EOS at position L (by
            default any action at position L ends the response with EOS, ``info["forced_eos"]``);
            ``feedback="pairwise"`` plays two responses a round with a Bradley-Terry preference bit as
            reward (see :mod:`~tokenized_bandit_gym.envs.pairwise_feedback` for the semantics and why).

    Attributes:
        config: the frozen config the env was made from (what pickling carries along).
        problem: the instance it built.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    observation_space: spaces.Dict  # type: ignore[assignment]  # gymnasium types Dict as Space[dict[str, Space]]
    action_space: spaces.Discrete
    optimal_kind = "exact"
    """The benchmark ``optimal_utility`` is: the exact optimum (the LLM envs name their oracle)."""
    config_class: ClassVar[type[SyntheticBanditConfig]]

    def __init__(
        self, config: SyntheticBanditConfig | None = None, render_mode: str | None = None, **keywords: Any
    ) -> None:
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.config = config = self.config_class.from_keywords(config, **keywords)
        if not isinstance(config.strict_actions, bool):
            raise TypeError(f"strict_actions must be a bool, got {config.strict_actions!r}")
        self.feedback_channel = config.feedback_channel()
        self.noise_model = self.feedback_channel.noise_model(config.noise, config.noise_scale)
        self.problem = problem = config.build_problem()
        self.feedback = self.feedback_channel.kind
        self.strict_actions = config.strict_actions
        n, length = problem.vocab_size, problem.max_length
        query_width = int(problem.query_tokens.shape[1])
        features = None
        if isinstance(problem, LinearTokenizedProblem):
            features = spaces.Box(-1.0, 1.0, shape=(n, problem.embedding_dim), dtype=np.float32)
        pairwise = self.feedback_channel.pairwise
        self.observation_space = observation_space(
            vocab_size=n,
            query_width=query_width,
            max_length=length,
            num_candidates=n,
            candidate_embeddings=features,
            pairwise=pairwise,
        )
        self.action_space = spaces.Discrete(n)
        self.rounds = SingleRoundBatch(problem)  # the round batch of B = 1, on the memoised host path
        self.rounds.info_schema = replace(self.rounds.info_schema, pairwise=pairwise)
        self._pairwise: PairwiseRound | None = None
        if pairwise:
            self._pairwise = PairwiseRound(length, problem.eos_token_id, self.feedback_channel.temperature)
        self._streams: RoundStreams | None = None
        self._num_queries = problem.num_queries  # Q, read at every reset
        self._max_length = problem.max_length  # L, read at every step

    @property
    def eos_token_id(self) -> int:
        """The EOS token id."""
        return self.problem.eos_token_id

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start a round: draw the query x_t and the round's noise from their own streams.

        ``seed`` reseeds both streams (never the instance, which ``instance_seed`` fixes): a non-negative integer,
        NumPy integers included (:func:`~tokenized_bandit_gym.core.validation.check_reset_seed`).

        Raises:
            TypeError: ``seed`` is a bool or not an integer.
            ValueError: ``seed`` is negative.
        """
        self._streams, query, noise = start_round_streams(
            self, self._streams, seed, self._num_queries, self.noise_model
        )
        rounds = self.rounds
        rounds.restart(True, query, noise)
        if self._pairwise is not None:
            self._pairwise.start()
        return self._observe(), round_start_info(query, rounds.info_schema)

    def step(self, action: object) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Append one token; the reward is 0 until the response is complete.

        Raises:
            ValueError: before :meth:`reset`, after the episode ended, for an out-of-range or
                NaN action, or a masked action when ``strict_actions`` (or an early EOS under
                ``fixed_length``).
            TypeError: a non-integer action.
        """
        rounds = self.rounds
        if rounds.node is None:
            raise ValueError("step() called before reset(): call reset() to start a round")
        if rounds.finished:
            raise ValueError("step() called after the episode ended: call reset() to start a new round")
        token, forced_eos = check_action(action, rounds.mask, rounds.lengths, self._max_length, self.strict_actions)
        # The mask allows only EOS at position L, so the response is complete exactly when the
        # token is EOS; the state is unfinished and shorter than L, as the core's extend() requires.
        rounds.advance(token)
        summary = rounds.round_summary(True) if rounds.finished else None
        pairwise = self._pairwise
        if pairwise is None or summary is None:
            reward, info = step_reward_and_info(rounds.queries, forced_eos, summary, rounds.noise, rounds.info_schema)
        elif not pairwise.deciding_second:  # the first response is complete: the second starts on the same query
            pairwise.keep_first(summary)
            rounds.restart(True, rounds.queries, rounds.noise)
            reward, info = step_reward_and_info(rounds.queries, forced_eos, None, rounds.noise, rounds.info_schema)
        else:
            reward, summary = pairwise.finish(summary, rounds.noise)
            info = step_reward_and_info(rounds.queries, forced_eos, summary, rounds.noise, rounds.info_schema)[1]
        observed = rounds.observe() if pairwise is None else self._observe()  # (scalar feedback: no call more)
        return observed, reward, rounds.finished, False, info

    def _observe(self) -> Observation:
        """The round's observation (with the first response under pairwise feedback)."""
        observed = self.rounds.observe()
        return observed if self._pairwise is None else self._pairwise.observation(observed)

    def action_masks(self) -> np.ndarray:
        """Allowed actions now, ``(k,)`` bool (sb3-contrib's MaskablePPO reads this)."""
        return self.rounds.mask.copy()

    def round_batch(self, num_rows: int, host: bool = True) -> RoundBatch[Any]:
        """A round batch of ``num_rows`` rounds of this env's instance, sharing its tables.

        What the native vector env and the PettingZoo arena step: rows in NumPy
        (:class:`HostRoundBatch`) when ``host`` and the instance is on the CPU, else tensors on
        its device (:class:`DeviceRoundBatch`).
        """
        batch: RoundBatch[Any]
        if host and self.problem.device.type == "cpu":
            batch = HostRoundBatch(self.problem, num_rows, self.rounds.tables)
        else:
            batch = DeviceRoundBatch(self.problem, num_rows, self.rounds.tables)
        batch.info_schema = self.rounds.info_schema  # with the comparison's entries under pairwise feedback
        return batch

    def render(self) -> str | np.ndarray | None:
        """The query and the response so far: text (``"ansi"``) or an image (``"rgb_array"``).

        The image is ``(2 * 8, max(Lq, L) * 8, 3)`` uint8: one 8x8 cell per token, coloured by
        token id (EOS black, padding white), the query on the top row and the response below.
        """
        rounds = self.rounds
        if self.render_mode is None or rounds.node is None:
            return None
        query = self.problem.query_tokens[rounds.queries, : int(self.problem.query_lengths[rounds.queries])].tolist()
        response = rounds.response[: rounds.lengths].tolist()
        if self.render_mode == "ansi":
            words = ["EOS" if t == self.eos_token_id else str(t) for t in response]
            return f"query {query} -> response [{' '.join(words)}]"
        width = max(int(self.problem.query_tokens.shape[1]), self.problem.max_length)
        return token_image([query, response], self.eos_token_id, width)
