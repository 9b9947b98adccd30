"""The Gymnasium shell shared by every tokenized bandit environment (a batch of one)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from tokenized_bandit_gym.core.action_mask_table import ActionMaskTable
from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.noise_model import NoiseModel
from tokenized_bandit_gym.core.pool_benchmarks import PoolBenchmarks
from tokenized_bandit_gym.core.query_start_memo import QueryStart, QueryStartMemo
from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.envs.env_contract import (
    check_action,
    observation,
    observation_space,
    round_summary,
    to_numpy,
    token_image,
)

Observation = dict[str, np.ndarray | np.int64]


class TokenizedBanditEnv(gym.Env[Observation, np.int64]):
    """One round of a tokenized bandit is one episode; see :mod:`tokenized_bandit_gym.envs`.

    Subclasses build the problem instance and call this constructor. The candidates of a
    synthetic env are the whole vocabulary (k = n), so an action is a token id.

    Args:
        problem: the fixed problem instance.
        noise: ``"gaussian"`` or ``"bounded"``.
        noise_scale: sigma >= 0.
        strict_actions: raise on a masked action instead of the forced EOS at position L.
        render_mode: None, ``"ansi"`` (text) or ``"rgb_array"`` (one coloured cell per token:
            the query on the top row, the response below; what SB3's ``make_vec_env`` asks for).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        problem: TokenizedProblem,
        noise: str,
        noise_scale: float,
        strict_actions: bool,
        render_mode: str | None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        if not isinstance(strict_actions, bool):
            raise TypeError(f"strict_actions must be a bool, got {strict_actions!r}")
        self.problem = problem
        self.noise_model = NoiseModel(noise, noise_scale)
        self.strict_actions = strict_actions
        self.render_mode = render_mode
        n, length = problem.vocab_size, problem.max_length
        query_width = int(problem.query_tokens.shape[1])
        features = None
        if isinstance(problem, LinearTokenizedProblem):
            features = spaces.Box(-1.0, 1.0, shape=(n, problem.embedding_dim), dtype=np.float32)
        self.observation_space = observation_space(
            vocab_size=n, query_width=query_width, max_length=length, num_candidates=n, candidate_embeddings=features
        )
        self.action_space = spaces.Discrete(n)
        self._candidate_tokens = np.arange(n, dtype=np.int64)
        self._query_tokens = to_numpy(problem.query_tokens).astype(np.int64)  # (Q, Lq), host copy
        self._query_lengths = to_numpy(problem.query_lengths).astype(np.int64)  # (Q,)
        self._has_embeddings = isinstance(problem, LinearTokenizedProblem)
        # Per step, only what depends on the actions goes through torch, once per prefix: the mask
        # is looked up, every prefix played (the round start included) and its candidates are
        # memoised per query, the round's benchmarks computed once per query.
        self._masks = ActionMaskTable(problem)
        self._starts = QueryStartMemo(problem, with_candidates=self._has_embeddings)
        self._benchmarks: PoolBenchmarks | None = None
        self._token_tensors = [problem.vocabulary[token : token + 1] for token in range(n)]  # n x (1,)
        if self._has_embeddings:
            self._no_embeddings = np.zeros(self.observation_space["candidate_embeddings"].shape, dtype=np.float32)
        self._finished = False
        self._streams: RoundStreams | None = None
        self._state: DecodingState | None = None
        self._node: QueryStart | None = None  # the memo's node of the current prefix
        self._mask_row = self._masks.row(0, finished=False)
        self._response = np.full(length, problem.eos_token_id, dtype=np.int64)  # (L,) host copy of the tokens
        self._length = 0
        self._noise = 0.0
        self._query = 0

    @property
    def eos_token_id(self) -> int:
        """The EOS token id."""
        return self.problem.eos_token_id

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start a round: draw the query x_t and the round's noise from their own streams.

        ``seed`` reseeds both streams (never the instance, which ``instance_seed`` fixes).
        """
        super().reset(seed=seed)
        self._streams = RoundStreams.on_reset(self._streams, seed, self.np_random)
        self._query, self._noise = self._streams.draw(self.problem.num_queries, self.noise_model)
        start = self._node = self._starts.get(self._query)
        self._state = start.state
        self._response.fill(self.eos_token_id)
        self._length = 0
        self._finished = False
        embeddings = None if start.host_embeddings is None else start.host_embeddings.copy()
        return self._observe(embeddings), {"query_index": self._query}

    def step(self, action: object) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Append one token; the reward is 0 until the response is complete.

        Raises:
            ValueError: before :meth:`reset`, after the episode ended, for an out-of-range or
                NaN action, or a masked action when ``strict_actions`` (or an early EOS under
                ``fixed_length``).
            TypeError: a non-integer action.
        """
        if self._state is None:
            raise ValueError("step() called before reset(): call reset() to start a round")
        if self._finished:
            raise ValueError("step() called after the episode ended: call reset() to start a new round")
        mask = self._masks.allowed[self._mask_row]  # (n,)
        token, forced_eos = check_action(action, mask, self._length, self.problem.max_length, self.strict_actions)
        # The mask allows only EOS at position L, so the response is complete exactly when the
        # token is EOS; the state is unfinished and shorter than L, as extend() requires.
        node = self._node = self._starts.child(self._query, self._node, token, self._token_tensors[token])
        self._state = node.state
        self._response[self._length] = token
        self._length += 1
        terminated = self._finished = token == self.eos_token_id
        info: dict[str, Any] = {"query_index": self._query, "forced_eos": forced_eos}
        reward = 0.0
        if terminated:
            info.update(self._round_summary())
            reward = info["utility"] + self._noise
            return self._observe(None), reward, True, False, info
        embeddings = None if node.host_embeddings is None else node.host_embeddings.copy()
        return self._observe(embeddings), reward, False, False, info

    def action_masks(self) -> np.ndarray:
        """Allowed actions now, ``(k,)`` bool (sb3-contrib's MaskablePPO reads this)."""
        return self._masks.allowed[self._mask_row].copy()

    def render(self) -> str | np.ndarray | None:
        """The query and the response so far: text (``"ansi"``) or an image (``"rgb_array"``).

        The image is ``(2 * 8, max(Lq, L) * 8, 3)`` uint8: one 8x8 cell per token, coloured by
        token id (EOS black, padding white), the query on the top row and the response below.
        """
        if self.render_mode is None or self._state is None:
            return None
        query = self._query_tokens[self._query, : self._query_lengths[self._query]].tolist()
        response = self._response[: self._length].tolist()
        if self.render_mode == "ansi":
            words = ["EOS" if t == self.eos_token_id else str(t) for t in response]
            return f"query {query} -> response [{' '.join(words)}]"
        width = max(int(self.problem.query_tokens.shape[1]), self.problem.max_length)
        return token_image([query, response], self.eos_token_id, width)

    # ------------------------------------------------------------------ helpers
    def _require_state(self) -> DecodingState:
        """The current state; raises before the first reset."""
        if self._state is None:
            raise ValueError("the environment has no round yet: call reset() first")
        return self._state

    def _observe(self, candidate_embeddings: np.ndarray | None) -> Observation:
        """The observation of the current round (host copies throughout).

        Args:
            candidate_embeddings: ``(n, d)`` float32 for TLB families while the response is
                incomplete (None otherwise: zeros are observed once it is complete).
        """
        self._mask_row = self._masks.row(self._length, self._finished)
        if self._has_embeddings and candidate_embeddings is None:
            candidate_embeddings = self._no_embeddings.copy()
        return observation(
            query=self._query_tokens[self._query].copy(),
            query_length=self._query_lengths[self._query].copy(),
            response=self._response.copy(),
            length=np.int64(self._length),
            candidate_tokens=self._candidate_tokens.copy(),
            action_mask=self._masks.allowed_int8[self._mask_row].copy(),
            candidate_embeddings=candidate_embeddings,
        )

    def _round_summary(self) -> dict[str, Any]:
        """Info entries of the round just completed (DESIGN.md section 2)."""
        state = self._require_state()
        if self._benchmarks is None:
            self._benchmarks = PoolBenchmarks.from_problem(self.problem)
        benchmarks, query = self._benchmarks, self._query
        node = self._node
        if node is None:
            raise ValueError("the environment has no round yet: call reset() first")
        if node.round_end is None:  # the complete response's utility and embedding, once per response
            embedding = None
            if self._has_embeddings:
                embedding = to_numpy(self.problem.embedding_of(state).to(torch.float32))[0].copy()  # (d,)
            node.round_end = (float(self.problem.utility_of_complete(state)), embedding)  # (1,) -> its one value
        utility, embedding = node.round_end
        return round_summary(
            utility=utility,
            optimal_utility=float(benchmarks.optimal_utility[query]),
            oracle_greedy_utility=float(benchmarks.oracle_greedy_utility[query]),
            optimal_kind="exact",
            noise=self._noise,
            response=self._response.copy(),  # (L,) padded with EOS
            response_length=self._length,
            optimal_response=benchmarks.optimal_responses[query].copy(),
            response_embedding=None if embedding is None else embedding.copy(),
        )
