"""The native vector env shared by the LLM-backed envs: N rounds in one batched forward per step."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from tokenized_bandit_gym.envs.env_contract import observation, round_summary
from tokenized_bandit_gym.envs.language_model_bandit_env import LanguageModelBanditEnv
from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import TokenizedBanditVectorEnv
from tokenized_bandit_gym.llm.language_model_state import LanguageModelState

MAX_CACHED_QUERIES = 256
"""Query pools up to this size have their initial states cached by default (one KV cache per query)."""


class LanguageModelBanditVectorEnv(TokenizedBanditVectorEnv):
    """N independent rounds of one LLM-backed instance, stepped as one batch of the LLM core.

    Sub-env i is the single env (:attr:`single_env_class`) reset with seed ``s_i``: the same
    instance (model, theta, queries: built once by the single env's constructor), the same query
    and noise streams, the same dynamics (:meth:`LanguageModelProblem.advance` with batch N, one
    forward per step over the KV cache), the same forced EOS and the same info entries. The
    Gymnasium API, the seeding, the action checks and the autoreset are
    :class:`~tokenized_bandit_gym.envs.tokenized_bandit_vector_env.TokenizedBanditVectorEnv`'s;
    this class supplies the LLM's hooks.

    Rounds restart row by row: the restarting rows' initial states (the query's KV cache and its
    first scored candidates) are put in place by :meth:`LanguageModelState.with_new_rows`, which
    left-pads the caches to a common width under the attention mask and trims the columns no row
    needs. The query pool is fixed, so with ``cache_initial_states`` the whole pool is encoded
    once (one forward, on first use) and a restart is a gather of its rows: no forward at all;
    otherwise each restart encodes the restarting rows' queries in one forward.
    Observations agree with the single envs' to float rounding (about 1e-6 on CPU, float32:
    the batched forward reduces over padded, wider tensors); tokens, actions and flags are equal.

    Autoreset: ``AutoresetMode.NEXT_STEP``, as in the synthetic vector envs.

    Infos: ``query_index`` and ``forced_eos`` as in the synthetic vector envs, and, on the rows
    whose round ended in this step (and only in steps where some round ended, whatever the
    backend), the single env's round summary: ``utility``, ``optimal_utility``, ``regret``,
    ``oracle_greedy_utility``, ``optimal_kind``, ``noise``, ``response`` and ``optimal_response``
    ``(N, L)`` padded with EOS, ``response_length``, ``response_logprob``, ``response_embedding`` (alignment) and
    ``text``. ``text`` is a NumPy object array of N strings (``""`` on the other rows) with
    both backends, since strings cannot be tensors; ``optimal_kind`` is a plain string with the
    torch backend and an object array with NumPy, as in the synthetic vector envs.

    Host round trips per step (the LLM's forward dominates them): which rows restart (to
    encode only those queries), the cache width after a restart, and, when rounds end, the
    benchmark caches (keyed by query on the host) and the decoded text.

    Args:
        num_envs: N >= 1.
        array_backend: ``"numpy"`` or ``"torch"`` (tensors on the model's device).
        round_buffer: rounds drawn ahead per sub-env.
        cache_initial_states: keep the initial state of every query of the pool (memory: one
            query's KV cache and candidates per query); None: when the pool has at most
            :data:`MAX_CACHED_QUERIES` queries.
        **env_kwargs: the single env's keywords (``model``, ``top_k``, ``max_length``, ``device``, ...).
    """

    single_env_class: ClassVar[type[LanguageModelBanditEnv]]  # type: ignore[assignment]

    def __init__(
        self,
        num_envs: int,
        array_backend: str = "numpy",
        round_buffer: int = 64,
        cache_initial_states: bool | None = None,
        **env_kwargs: Any,
    ) -> None:
        if cache_initial_states is not None and not isinstance(cache_initial_states, bool):
            raise TypeError(f"cache_initial_states must be a bool or None, got {cache_initial_states!r}")
        super().__init__(num_envs, array_backend, round_buffer, **env_kwargs)
        if cache_initial_states is None:
            cache_initial_states = self.problem.num_queries <= MAX_CACHED_QUERIES
        self.cache_initial_states = cache_initial_states
        self._initial_states: LanguageModelState | None = None  # (Q rows) built on first use
        template = self._template
        self.optimal_kind = template.optimal_kind
        self.beam_width = template.beam_width
        self.observe_features = template.observe_features
        self.observe_logprobs = template.observe_logprobs
        self._has_embeddings = False  # the synthetic observation path is not used here
        space = template.observation_space.spaces.get("candidate_embeddings")
        self._feature_low = self._feature_high = None
        if space is not None:
            self._feature_low = torch.as_tensor(space.low, device=self.device)  # (k, d + 1)
            self._feature_high = torch.as_tensor(space.high, device=self.device)  # (k, d + 1)

    # ------------------------------------------------------------------ hooks
    def _initial_state(self, queries: torch.Tensor) -> LanguageModelState:
        """New rounds on ``queries`` ``(R,)``: rows of the query pool's cached states, or one forward of them."""
        if not self.cache_initial_states:
            return self.problem.initial_state(queries)
        if self._initial_states is None:  # the whole pool in one forward, left-padded to the longest query
            pool = torch.arange(self.problem.num_queries, device=self.device)  # (Q,)
            self._initial_states = self.problem.initial_state(pool)
        return self._initial_states.select(queries).trimmed()

    def _forced_actions(self, actions: torch.Tensor, forced_eos: torch.Tensor) -> torch.Tensor:
        """``actions`` ``(N,)`` with the EOS candidate's index (the only allowed one) on the rows ``forced_eos``."""
        eos_action = self._mask.int().argmax(dim=1)  # (N,) first allowed candidate
        return torch.where(forced_eos, eos_action, actions)  # (N,)

    def _advance(self, state: LanguageModelState, actions: torch.Tensor, stepping: torch.Tensor) -> LanguageModelState:
        """Append the chosen candidates ``(N,)`` on the rows ``stepping`` ``(N,)``: one forward (none if no row steps).

        Rows that only restart in this step ride along in the forward (masked); when every row
        restarts, as at N = 1, the forward is skipped.
        """
        if not bool(stepping.any()):
            return state
        return self.problem.advance(state, actions, active=stepping)

    def _restart_rows(self, state: LanguageModelState, resetting: torch.Tensor) -> LanguageModelState:
        """Encode the buffer's current query on the rows ``resetting`` ``(N,)`` only and put them in place."""
        rows = torch.nonzero(resetting).flatten()  # (R,)
        if rows.numel() == 0:
            return state
        queries, noise = self._rounds.current()  # (N,), (N,)
        fresh = self._initial_state(queries[rows])  # R rows
        self._noise = torch.where(resetting, noise, self._noise)
        return state.with_new_rows(rows, fresh)

    def _observe(self, state: LanguageModelState) -> dict[str, Any]:
        """Batched observations of ``state``, as the single env builds each row."""
        problem = self.problem
        self._mask = problem.action_mask(state)  # (N, k)
        finished = state.finished[:, None]  # (N, 1)
        features = logprobs = None
        if self.observe_features:
            features = problem.candidate_embeddings(state).to(torch.float32)  # (N, k, d + 1)
            features = torch.clamp(features, self._feature_low, self._feature_high)  # rounding of unit-norm e only
            features = torch.where(finished[:, :, None], 0.0, features)
        if self.observe_logprobs:
            logprobs = torch.where(finished, 0.0, state.candidate_logprobs.to(torch.float32))  # (N, k)
        observed = observation(
            query=problem.query_tokens[state.queries],  # (N, Lq)
            query_length=problem.query_lengths[state.queries],  # (N,)
            response=state.tokens.clone(),  # (N, L)
            length=state.lengths.clone(),  # (N,)
            candidate_tokens=state.candidate_tokens.clone(),  # (N, k)
            action_mask=self._mask.to(torch.int8),  # (N, k)
            candidate_embeddings=features,  # (N, k, d + 1) or None
            candidate_logprobs=logprobs,  # (N, k) or None
        )
        if self.array_backend == "torch":
            return observed
        return {key: observed[key].cpu().numpy() for key in self.single_observation_space.spaces}

    def _round_summary(self, state: LanguageModelState, terminated: torch.Tensor) -> dict[str, Any]:
        """Round-end info entries (zeros, ``""`` or None off the rows ``terminated`` ``(N,)``); ``{}`` if none ended."""
        ended = terminated.cpu().numpy()  # the benchmark caches and the text live on the host
        if not ended.any():
            return {}
        problem = self.problem
        queries = state.queries
        utility = problem.utility_of(state).to(torch.float64)  # (N,)
        greedy = problem.oracle_greedy(queries)
        optimum = problem.oracle_beam(queries, self.beam_width) if self.optimal_kind == "oracle_beam" else greedy
        text = np.full(self.num_envs, "", dtype=object)
        tokens = state.tokens.cpu().numpy()  # (N, L)
        for row in np.flatnonzero(ended):  # decoding text is a tokenizer call per ended round
            text[row] = problem.decode(tokens[row])
        kind: Any = self.optimal_kind
        if self.array_backend == "numpy":
            kind = np.full(self.num_envs, None, dtype=object)
            kind[ended] = self.optimal_kind
        return round_summary(
            utility=utility,  # (N,)
            optimal_utility=optimum.utility.to(torch.float64),  # (N,)
            oracle_greedy_utility=greedy.utility.to(torch.float64),  # (N,)
            optimal_kind=kind,
            noise=self._noise,  # (N,)
            response=state.tokens,  # (N, L)
            response_length=state.lengths,  # (N,)
            optimal_response=optimum.responses,  # (N, L)
            response_embedding=problem.embedding_of(state).to(torch.float32) if problem.embeddings else None,
            ended=terminated,
            response_logprob=state.sequence_logprob.to(torch.float64),  # (N,)
            text=text,
        )
