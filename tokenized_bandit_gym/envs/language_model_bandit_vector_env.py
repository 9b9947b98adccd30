"""The native vector env shared by the LLM-backed envs: N rounds in one batched forward per step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from tokenized_bandit_gym.envs.captured_language_model_advance import CapturedLanguageModelAdvance
from tokenized_bandit_gym.envs.language_model_bandit_env import BENCHMARK_UPPER_BOUND, LanguageModelBanditEnv
from tokenized_bandit_gym.envs.language_model_round_batch import LanguageModelRoundBatch
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv
from tokenized_bandit_gym.envs.tokenized_bandit_vector_env import (
    TokenizedBanditVectorEnv,
    VectorArray,
    VectorObservation,
)

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
    the rounds are the single env's
    :class:`~tokenized_bandit_gym.envs.language_model_round_batch.LanguageModelRoundBatch` with N
    rows (the single env steps the same batch with one row). Rounds restart row by row; the query
    pool is fixed, so with ``cache_initial_states`` the whole pool is encoded once (one forward,
    on first use) and a restart is a gather of its rows, no forward at all.
    Observations agree with the single envs' to float rounding (about 1e-6 on CPU, float32:
    the batched forward reduces over padded, wider tensors); tokens, actions and flags are equal.

    Autoreset (``autoreset_mode``: ``NEXT_STEP``, ``SAME_STEP`` or ``DISABLED``) and infos as in
    the synthetic vector envs: every step the env contract's schema, with the single env's round
    summary (``response_logprob`` and, for alignment, ``response_embedding`` included) on the
    rows whose round ended and fill values elsewhere. No entry is a string: a row's text is
    :meth:`response_text` of its ``info["response"]`` row.

    ``step_mode="captured"`` (a keyword of the shared vector env) advances the rounds through the
    static-shape step captured as a CUDA graph on CUDA
    (:class:`~tokenized_bandit_gym.envs.captured_language_model_advance.CapturedLanguageModelAdvance`):
    the same tokens, features and infos to float rounding; a model it cannot step is a ``ValueError``.

    Host round trips per step (the LLM's forward dominates them): which rows restart (to
    encode only those queries), the cache width after a restart, and whether some round ended
    (the benchmark caches are keyed by query on the host).

    Args:
        num_envs: N >= 1.
        array_backend: ``"numpy"`` or ``"torch"`` (tensors on the model's device).
        round_buffer: rounds drawn ahead per sub-env.
        cache_initial_states: keep the initial state of every query of the pool (memory: one
            query's KV cache and candidates per query); None: when the pool has at most
            :data:`MAX_CACHED_QUERIES` queries.
        **env_kwargs: the single env's keywords (``model``, ``top_k``, ``max_length``, ``device``, ...).
    """

    single_env_class: ClassVar[type[LanguageModelBanditEnv]]
    _template: LanguageModelBanditEnv

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
        self.cache_initial_states = cache_initial_states
        super().__init__(num_envs, array_backend, round_buffer, **env_kwargs)
        template = self._template
        self.beam_width = template.beam_width
        self.observe_features = template.observe_features
        self.observe_logprobs = template.observe_logprobs

    def response_text(self, response: np.ndarray | torch.Tensor | Sequence[int]) -> str:
        """The text of one row of ``info["response"]`` (``(L,)``; the fill value gives ``""``)."""
        return self._template.response_text(response)

    benchmark_upper_bound = BENCHMARK_UPPER_BOUND

    def reset(self, *args: Any, **kwargs: Any) -> tuple[VectorObservation, dict[str, Any]]:
        """The shared vector env's reset; ``infos["benchmark_upper_bound"]`` ``(N,)`` bool is added."""
        observations, infos = super().reset(*args, **kwargs)
        return observations, self._with_benchmark_flag(infos)

    def step(
        self, actions: VectorArray | Sequence[int]
    ) -> tuple[VectorObservation, VectorArray, VectorArray, VectorArray, dict[str, Any]]:
        """The shared vector env's step; ``infos["benchmark_upper_bound"]`` ``(N,)`` bool is added."""
        observations, rewards, terminated, truncated, infos = super().step(actions)
        return observations, rewards, terminated, truncated, self._with_benchmark_flag(infos)

    def _with_benchmark_flag(self, infos: dict[str, Any], present: Any = None) -> dict[str, Any]:
        """``infos`` with the ``(N,)`` bool flag :data:`BENCHMARK_UPPER_BOUND`, in the array backend.

        The flag is on every row (``present`` None), and on the rows that ended in ``SAME_STEP``'s
        ``final_info`` (masked as its other entries are), so a final info has every key a step's has.
        """
        if self.array_backend == "numpy":
            flag: Any = np.full(self.num_envs, BENCHMARK_UPPER_BOUND, dtype=bool)
            mask: Any = np.ones(self.num_envs, dtype=bool) if present is None else present.copy()
        else:
            flag = torch.full((self.num_envs,), BENCHMARK_UPPER_BOUND, dtype=torch.bool, device=self.device)
            mask = (
                torch.ones(self.num_envs, dtype=torch.bool, device=self.device) if present is None else present.clone()
            )
        infos["benchmark_upper_bound"], infos["_benchmark_upper_bound"] = flag, mask
        if present is None and "final_info" in infos:
            self._with_benchmark_flag(infos["final_info"], infos["_final_info"])
        return infos

    def _make_captured_step(self) -> None:
        """``step_mode="captured"``: the rounds advance through the static step (the shell's step stays eager).

        See :class:`~tokenized_bandit_gym.envs.captured_language_model_advance.CapturedLanguageModelAdvance`.

        Raises:
            ValueError: pairwise feedback, or a model or setting the static step refuses (named).
        """
        if self._pairwise is not None:
            raise ValueError(f"step_mode='captured' does not serve feedback={self.feedback!r}; use step_mode='eager'")
        assert isinstance(self.rounds, LanguageModelRoundBatch)
        self.rounds.static_advance = CapturedLanguageModelAdvance(self.rounds)

    def _make_round_batch(self, template: TokenizedBanditEnv | LanguageModelBanditEnv) -> LanguageModelRoundBatch:
        """The N-row LLM round batch, with the pool's initial states cached as ``cache_initial_states`` says."""
        if not isinstance(template, LanguageModelBanditEnv):
            raise TypeError(f"{type(self).__name__} plays an LLM-backed env, got {type(template).__name__}")
        cache = self.cache_initial_states
        if cache is None:
            cache = self.cache_initial_states = template.problem.num_queries <= MAX_CACHED_QUERIES
        return template.round_batch(self.num_envs, cache_initial_states=cache)
