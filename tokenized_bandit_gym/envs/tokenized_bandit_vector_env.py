"""The native vector env shared by every synthetic tokenized bandit: N rounds in one batch of the core."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from tokenized_bandit_gym.core.action_mask_table import ActionMaskTable
from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.pool_benchmarks import PoolBenchmarks
from tokenized_bandit_gym.core.round_buffer import RoundBuffer
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_choice, check_int
from tokenized_bandit_gym.envs.env_contract import forced_and_refused, observation, round_summary
from tokenized_bandit_gym.envs.host_round_batch import HostRoundBatch
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv

ARRAY_BACKENDS = ("numpy", "torch")


class TokenizedBanditVectorEnv(VectorEnv):
    """N independent rounds of one tokenized bandit instance, stepped as one batch of the core.

    Sub-env i is exactly the single env (:attr:`single_env_class`) reset with seed ``s_i``: the
    same instance (built once, by the single env's own constructor), the same query and noise
    streams (:class:`~tokenized_bandit_gym.core.round_buffer.RoundBuffer`), the same dynamics
    (``TokenizedProblem.extend`` and friends, called with batch N instead of 1), the same
    forced EOS and the same info entries. Subclasses name the single env class; a core with
    another state (the LLM's) overrides the small hooks ``_initial_state``, ``_forced_actions``,
    ``_advance``, ``_restart_rows``, ``_observe`` and ``_round_summary``.

    Autoreset: ``AutoresetMode.NEXT_STEP`` (Gymnasium's default, and what ``SyncVectorEnv``
    does). Rounds end at different steps (EOS); the step that ends sub-env i's round returns
    its final observation, the reward and ``terminated[i] = True``; on the next ``step`` that
    sub-env ignores its action, starts a new round and returns its first observation, reward 0,
    ``terminated[i] = False`` and ``info["query_index"][i]`` of the new round.

    Infos are a dict of arrays with ``_key`` masks, as Gymnasium's vector envs build them:
    ``query_index`` (every row), ``forced_eos`` (rows that appended a token) and, on the rows
    whose round ended in this step, ``utility``, ``optimal_utility``, ``regret``,
    ``oracle_greedy_utility``, ``optimal_kind``, ``noise``, ``response`` and
    ``optimal_response`` ``(N, L)`` padded with EOS (as in the single env), ``response_length``
    ``(N,)``, and ``response_embedding`` for TLB. Unmasked rows hold zeros. With the NumPy
    backend the round-end keys appear only in steps where some round ended (as in
    ``SyncVectorEnv``; likewise ``forced_eos`` when every row autoresets); with the torch backend
    they are always present (deciding would cost a host round trip) and ``optimal_kind`` is a
    plain string.

    Array backends: ``array_backend="numpy"`` (default) returns NumPy arrays; ``"torch"``
    returns tensors on the instance's ``device`` and takes actions as tensors there. On an
    accelerator nothing is copied to the host per step but one flag (whether any action is
    invalid), plus the round buffer's cursors once every ``round_buffer - 1`` steps. With the
    NumPy backend and an instance on the CPU, a synthetic env keeps the rounds' bookkeeping in
    NumPy (:class:`~tokenized_bandit_gym.envs.host_round_batch.HostRoundBatch`: the same core
    calls, once per step, with everything of size N on the host, where an operation costs a
    microsecond instead of a torch dispatch's ten); the torch path does the same steps with
    tensors, and the tests hold the two equal.

    Args:
        num_envs: N >= 1.
        array_backend: ``"numpy"`` or ``"torch"``.
        round_buffer: rounds drawn ahead per sub-env (a device copy every ``round_buffer - 1``
            steps).
        **env_kwargs: the single env's keywords (``device`` places the instance and, with the
            torch backend, every returned tensor).
    """

    single_env_class: ClassVar[type[TokenizedBanditEnv]]
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int,
        array_backend: str = "numpy",
        round_buffer: int = 256,
        **env_kwargs: Any,
    ) -> None:
        self.num_envs = check_int("num_envs", num_envs, minimum=1)
        self.array_backend = check_choice("array_backend", array_backend, ARRAY_BACKENDS)
        if env_kwargs.get("render_mode") is not None:
            raise ValueError(f"the vector env does not render; got render_mode={env_kwargs['render_mode']!r}")
        template = self.single_env_class(**env_kwargs)
        self._template = template  # the single env whose instance every sub-env shares
        self.problem = template.problem
        self.noise_model = template.noise_model
        self.strict_actions = template.strict_actions
        self.single_observation_space = template.observation_space
        self.single_action_space = template.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.device = self.problem.device
        self._on_host = self.device.type == "cpu"  # host checks are free here, a sync on an accelerator
        self._has_embeddings = isinstance(self.problem, LinearTokenizedProblem)
        self._num_actions = int(self.single_action_space.n)
        self._row_indices = np.arange(self.num_envs)  # (N,)
        self._rounds = RoundBuffer(
            self.num_envs,
            self.problem.num_queries,
            self.noise_model,
            check_int("round_buffer", round_buffer, minimum=2),
            self.device,
        )
        self._candidate_tokens = np.broadcast_to(
            np.arange(self._num_actions, dtype=np.int64), (self.num_envs, self._num_actions)
        )
        self._candidate_tokens_tensor = torch.arange(self._num_actions, device=self.device).expand(self.num_envs, -1)
        self._state: Any = None  # the core's batched state (DecodingState, or the LLM's)
        self._noise = torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)  # (N,)
        self._autoreset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)  # (N,)
        self._mask = torch.zeros(self.num_envs, self._num_actions, dtype=torch.bool, device=self.device)  # (N, n)
        self._mask_rows: torch.Tensor | None = None  # (L + 2, n) bool, the action mask table (built on first use)
        self._mask_rows_int8: torch.Tensor | None = None  # (L + 2, n) int8
        self._benchmark_utilities: torch.Tensor | None = None  # (Q, 2) float64, built on first use
        self._benchmark_responses: torch.Tensor | None = None  # (Q, L) int64
        # The NumPy backend on the CPU keeps the synthetic rounds' bookkeeping in NumPy (the LLM's state is its own).
        self._host: HostRoundBatch | None = None
        if self.array_backend == "numpy" and self._on_host and isinstance(self.problem, TokenizedProblem):
            self._host = HostRoundBatch(self.problem, self.num_envs)
        self._host_autoreset = np.zeros(self.num_envs, dtype=bool)  # (N,) the host path's autoreset rows

    @property
    def eos_token_id(self) -> int:
        """The EOS token id."""
        return self.problem.eos_token_id

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start a new round on every sub-env.

        Args:
            seed: ``None`` (continue each sub-env's streams; draw fresh seeds from
                :attr:`np_random` the first time), an ``int`` s (sub-env i gets ``s + i``, as
                in ``SyncVectorEnv``) or a sequence of N ints or Nones.
            options: ignored, as in the single env.

        Returns:
            The batched first observations and ``{"query_index": (N,), "_query_index": (N,)}``.
        """
        seeds = self._row_seeds(seed)
        super().reset(seed=seed if isinstance(seed, Integral) else None)
        fresh_rows: list[int] = []
        fresh_seeds: list[int] = []
        for row, row_seed in enumerate(seeds):
            if row_seed is not None:
                fresh_rows.append(row)
                fresh_seeds.append(row_seed)
            elif not self._rounds.is_seeded(row):
                fresh_rows.append(row)
                fresh_seeds.append(int(self.np_random.integers(2**63 - 1)))
        self._rounds.seed(fresh_rows, fresh_seeds)
        if self._host is not None:
            return self._reset_on_host(self._host, fresh_rows)
        continuing = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        continuing[torch.as_tensor(fresh_rows, dtype=torch.int64, device=self.device)] = False
        self._rounds.advance(continuing)
        queries, self._noise = self._rounds.current()
        self._state = self._initial_state(queries)
        self._autoreset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        observations = self._observe(self._state)
        everyone = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        infos = {"query_index": self._to_backend(queries), "_query_index": self._to_backend(everyone)}
        return observations, infos

    def step(self, actions: Any) -> tuple[dict[str, Any], Any, Any, Any, dict[str, Any]]:
        """Append one token per sub-env (sub-envs whose round ended last step start a new one).

        Args:
            actions: ``(N,)`` integer token ids (NumPy array, sequence or tensor). Entries of
                sub-envs that autoreset in this step are range-checked and otherwise ignored.

        Raises:
            ValueError: before :meth:`reset`; wrong shape; an action out of ``[0, n)``; a masked
                action (always before position L, and at L too when ``strict_actions``).
            TypeError: a non-integer dtype (bools and floats included).
        """
        if self._state is None:
            raise ValueError("step() called before reset(): call reset() to start the rounds")
        if self._host is not None:
            return self._step_on_host(self._host, actions)
        state = self._state
        tokens = self._action_tensor(actions)  # (N,)
        stepping = ~self._autoreset  # (N,)
        allowed = self._mask.gather(1, tokens.clamp(0, self._num_actions - 1)[:, None])[:, 0]  # (N,)
        out_of_range = (tokens < 0) | (tokens >= self._num_actions)  # (N,)
        forced_eos, refused = forced_and_refused(
            allowed, state.lengths, stepping, self.problem.max_length, self.strict_actions
        )  # (N,) each
        if bool((out_of_range | refused).any()):
            self._raise_invalid(tokens, out_of_range, refused, state)
        state = self._advance(state, self._forced_actions(tokens, forced_eos), stepping)
        terminated = stepping & state.finished  # (N,)
        summary = self._round_summary(state, terminated)
        utility = summary.get("utility")
        if utility is None:
            rewards = torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)
        else:
            rewards = torch.where(terminated, utility + self._noise, 0.0)  # (N,)
        resetting = self._autoreset
        self._rounds.advance(resetting)
        state = self._restart_rows(state, resetting)
        self._state = state
        self._autoreset = terminated
        observations = self._observe(state)
        infos: dict[str, Any] = {
            "query_index": self._to_backend(state.queries),
            "_query_index": self._to_backend(torch.ones_like(stepping)),
        }
        if self.array_backend == "torch" or bool(stepping.any()):
            infos["forced_eos"], infos["_forced_eos"] = self._to_backend(forced_eos), self._to_backend(stepping)
        ended = self._to_backend(terminated)
        for key, value in summary.items():
            infos[key] = value if isinstance(value, (str, np.ndarray)) else self._to_backend(value)
            infos[f"_{key}"] = ended.clone() if isinstance(ended, torch.Tensor) else ended.copy()
        truncated = torch.zeros_like(terminated)
        return (
            observations,
            self._to_backend(rewards),
            self._to_backend(terminated),
            self._to_backend(truncated),
            infos,
        )

    def action_masks(self) -> Any:
        """Allowed actions now, ``(N, k)`` bool (array or tensor by backend)."""
        return self._to_backend(self._mask.clone())

    # ------------------------------------------------------------------ the NumPy backend on the CPU
    def _reset_on_host(self, batch: HostRoundBatch, fresh_rows: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`reset` after seeding, with the rounds in ``batch``: every row starts its current round."""
        continuing = np.ones(self.num_envs, dtype=bool)
        continuing[fresh_rows] = False
        self._rounds.advance(continuing)
        queries, noise = self._rounds.current_on_host()  # (N,), (N,)
        everyone = np.ones(self.num_envs, dtype=bool)
        batch.restart(everyone, queries, noise)
        self._state = batch.state()
        self._host_autoreset = np.zeros(self.num_envs, dtype=bool)
        return self._observe_on_host(batch), {"query_index": queries, "_query_index": everyone}

    def _step_on_host(
        self, batch: HostRoundBatch, actions: Any
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """:meth:`step` with the rounds in ``batch`` (the same checks, dynamics and outputs as the torch path)."""
        tokens = self._action_array(actions)  # (N,)
        stepping = ~self._host_autoreset  # (N,)
        out_of_range = (tokens < 0) | (tokens >= self._num_actions)  # (N,)
        flat = self._row_indices * self._num_actions + np.where(out_of_range, 0, tokens)  # (N,) into the flat mask
        allowed = np.take(batch.mask, flat)  # (N,)
        forced_eos, refused = forced_and_refused(
            allowed, batch.lengths, stepping, self.problem.max_length, self.strict_actions
        )  # (N,) each
        if (out_of_range | refused).any():
            self._raise_invalid(
                torch.from_numpy(tokens), torch.from_numpy(out_of_range), torch.from_numpy(refused), batch.state()
            )
        batch.advance(np.where(forced_eos, self.eos_token_id, tokens))
        terminated = stepping & batch.finished  # (N,)
        summary = batch.round_summary(terminated) if terminated.any() else {}
        rewards = np.where(terminated, summary["utility"] + batch.noise, 0.0) if summary else np.zeros(self.num_envs)
        resetting = self._host_autoreset
        self._rounds.advance(resetting)
        if resetting.any():
            queries, noise = self._rounds.current_on_host()
            batch.restart(resetting, queries, noise)
        self._host_autoreset = terminated
        observations = self._observe_on_host(batch)
        infos: dict[str, Any] = {"query_index": batch.queries.copy(), "_query_index": np.ones(self.num_envs, bool)}
        if stepping.any():
            infos["forced_eos"], infos["_forced_eos"] = forced_eos, stepping
        for key, value in summary.items():
            infos[key], infos[f"_{key}"] = value, terminated.copy()
        return observations, rewards, terminated.copy(), np.zeros(self.num_envs, dtype=bool), infos

    def _observe_on_host(self, batch: HostRoundBatch) -> dict[str, Any]:
        """``batch``'s observation in the observation space's key order (and cache its mask)."""
        observation = batch.observe()
        self._mask = torch.from_numpy(batch.mask)
        return {key: observation[key] for key in self.single_observation_space.spaces}

    # ------------------------------------------------------------------ hooks (overridden by the LLM vector env)
    def _initial_state(self, queries: torch.Tensor) -> Any:
        """The core's state of new rounds on ``queries`` ``(N,)``."""
        return self.problem.initial_state(queries)

    def _forced_actions(self, actions: torch.Tensor, forced_eos: torch.Tensor) -> torch.Tensor:
        """``actions`` ``(N,)`` with the EOS action on the rows ``forced_eos`` ``(N,)`` (here EOS is a token id)."""
        return torch.where(forced_eos, self.eos_token_id, actions)  # (N,)

    def _advance(self, state: Any, actions: torch.Tensor, stepping: torch.Tensor) -> Any:
        """Append ``actions`` ``(N,)`` on the rows ``stepping`` ``(N,)`` (one batch of the core).

        The other rows are exactly those that restart in this step (their round ended last
        step): :meth:`_restart_rows` overwrites them, so they take a throwaway token here (at
        column L - 1 if they hold L tokens) instead of costing a row selection on every field.
        A stepping row is unfinished and shorter than L, and its action is EOS at position L
        (only EOS is allowed there, or the forced EOS replaced it), so :meth:`extend` applies
        as is; it computes the chosen token's carry alone (``append`` equals the candidates'
        carries element for element, so sub-env i still matches the single env bit for bit).
        """
        problem = self.problem
        in_range = replace(state, lengths=state.lengths.clamp(max=problem.max_length - 1))
        return problem.extend(in_range, actions)

    def _restart_rows(self, state: Any, resetting: torch.Tensor) -> Any:
        """``state`` with a fresh round (the buffer's current one) on the rows ``resetting`` ``(N,)``."""
        if self._on_host and not bool(resetting.any()):  # on the host, skip the work when no round starts
            return state
        problem = self.problem
        queries, noise = self._rounds.current()  # (N,), (N,)
        carry_rows = resetting.view(-1, *([1] * (state.carry.dim() - 1)))
        state = DecodingState(
            queries=torch.where(resetting, queries, state.queries),
            tokens=state.tokens.masked_fill(resetting[:, None], problem.eos_token_id),
            lengths=state.lengths.masked_fill(resetting, 0),
            finished=state.finished & ~resetting,
            carry=torch.where(carry_rows, problem.initial_carry(queries), state.carry),
            last_tokens=torch.where(resetting, problem.query_last_tokens[queries], state.last_tokens),
        )
        self._noise = torch.where(resetting, noise, self._noise)
        return state

    # ------------------------------------------------------------------ helpers
    def _row_seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        """Per-sub-env seeds from ``reset``'s ``seed`` argument, validated."""
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, Integral) and not isinstance(seed, bool):
            return [int(seed) + row for row in range(self.num_envs)]
        if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence):
            raise TypeError(f"seed must be None, an int or a sequence of {self.num_envs} ints, got {seed!r}")
        if len(seed) != self.num_envs:
            raise ValueError(f"seed must have one entry per sub-env ({self.num_envs}), got {len(seed)}: {seed!r}")
        for row, value in enumerate(seed):
            if value is not None and (isinstance(value, bool) or not isinstance(value, Integral) or value < 0):
                raise ValueError(f"seed[{row}] must be None or a non-negative int, got {value!r}")
        return [None if value is None else int(value) for value in seed]

    def _action_tensor(self, actions: Any) -> torch.Tensor:
        """``actions`` as an ``(N,)`` int64 tensor on the device; raises on shape or dtype."""
        if not isinstance(actions, torch.Tensor):
            return torch.from_numpy(self._action_array(actions)).to(self.device)
        if actions.dtype == torch.bool or actions.dtype.is_floating_point or actions.dtype.is_complex:
            raise TypeError(f"actions must be integer token indices, got a tensor of dtype {actions.dtype}")
        self._check_action_shape(tuple(actions.shape))
        return actions.to(self.device, torch.int64)

    def _action_array(self, actions: Any) -> np.ndarray:
        """``actions`` as an ``(N,)`` int64 array (maybe the caller's: read only); raises on shape or dtype."""
        if isinstance(actions, torch.Tensor):
            return self._action_tensor(actions).cpu().numpy()
        array = np.asarray(actions)
        if array.dtype.kind not in "iu":
            raise TypeError(f"actions must be integer token indices, got dtype {array.dtype}: {actions!r}")
        if array.dtype == np.uint64:
            array = np.minimum(array, np.iinfo(np.int64).max)
        self._check_action_shape(array.shape)
        return np.ascontiguousarray(array, dtype=np.int64)

    def _check_action_shape(self, shape: tuple[int, ...]) -> None:
        """Raise ``ValueError`` unless ``shape`` is ``(N,)``."""
        if shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), one token per sub-env, got shape {shape}")

    def _raise_invalid(
        self,
        tokens: torch.Tensor,
        out_of_range: torch.Tensor,
        refused: torch.Tensor,
        state: Any,
    ) -> None:
        """Raise ``ValueError`` naming the first invalid action and its sub-env."""
        bad_range = torch.nonzero(out_of_range).flatten().tolist()
        if bad_range:
            row = bad_range[0]
            raise ValueError(
                f"action {int(tokens[row])} of sub-env {row} is out of range: it must lie in [0, {self._num_actions}) "
                f"({len(bad_range)} sub-env(s) out of range: {bad_range[:10]})"
            )
        row = int(torch.nonzero(refused).flatten()[0])
        allowed = torch.nonzero(self._mask[row]).flatten().tolist()
        raise ValueError(
            f"action {int(tokens[row])} of sub-env {row} is masked at position {int(state.lengths[row]) + 1}: "
            f"allowed actions are {allowed}"
        )

    def _observe(self, state: DecodingState) -> dict[str, Any]:
        """Batched observations of ``state`` (and cache the mask).

        The mask is a row of the single env's :class:`ActionMaskTable` (by length, or the
        complete-response row), and the candidates' embeddings come rounded to float32 from
        :meth:`LinearTokenizedProblem.observed_candidate_embeddings` (one gather of the
        feature table and one add for the discounted family).
        """
        problem = self.problem
        if self._mask_rows is None:
            table = ActionMaskTable(problem)
            self._mask_rows = torch.tensor(table.allowed, device=self.device)  # (L + 2, n) bool
            self._mask_rows_int8 = torch.tensor(table.allowed_int8, device=self.device)  # (L + 2, n) int8
        table_rows = torch.where(state.finished, problem.max_length + 1, state.lengths)  # (N,)
        self._mask = self._mask_rows[table_rows]  # (N, n)
        embeddings = None
        if self._has_embeddings:
            embeddings = problem.observed_candidate_embeddings(state)  # (N, n, d) float32
            if self._on_host:  # zero only the finished rows (a boolean index_put scans every element)
                embeddings.index_fill_(0, torch.nonzero(state.finished).flatten(), 0.0)
            else:  # no host round trip to find them
                embeddings.masked_fill_(state.finished[:, None, None], 0.0)
        observed = observation(
            query=problem.query_tokens[state.queries],  # (N, Lq)
            query_length=problem.query_lengths[state.queries],  # (N,)
            response=state.tokens.clone(),  # (N, L)
            length=state.lengths.clone(),  # (N,)
            candidate_tokens=self._candidate_tokens_tensor,  # (N, n), copied below
            action_mask=self._mask_rows_int8[table_rows],  # (N, n)
            candidate_embeddings=embeddings,  # (N, n, d) float32 or None
        )
        if self.array_backend == "torch":
            observed["candidate_tokens"] = self._candidate_tokens_tensor.clone()
            return observed
        arrays = {key: value.cpu().numpy() for key, value in observed.items() if key != "candidate_tokens"}
        arrays["candidate_tokens"] = self._candidate_tokens.copy()
        return {key: arrays[key] for key in self.single_observation_space.spaces}

    def _round_summary(self, state: DecodingState, terminated: torch.Tensor) -> dict[str, Any]:
        """Round-end info entries for every row (zeros where ``terminated`` is False).

        The rows are read from the pool's benchmarks (:meth:`_pool_benchmarks`) and the
        utility of the complete responses, and masked by the env contract's
        :func:`~tokenized_bandit_gym.envs.env_contract.round_summary`. The NumPy backend returns
        ``{}`` when no round ended (one cheap host check on the CPU).
        """
        numpy_backend = self.array_backend == "numpy"
        if numpy_backend and not bool(terminated.any()):
            return {}
        problem = self.problem
        pool_utilities, pool_responses = self._pool_benchmarks()
        benchmarks = pool_utilities[state.queries]  # (N, 2) optimal, oracle greedy
        kind: Any = "exact"
        if numpy_backend:
            kind = np.full(self.num_envs, None, dtype=object)
            kind[terminated.cpu().numpy()] = "exact"
        embedding = None
        if isinstance(problem, LinearTokenizedProblem):
            embedding = problem.embedding_of(state).to(torch.float32)  # (N, d)
        return round_summary(
            utility=problem.utility_of_complete(state).to(torch.float64),  # (N,) complete on the rows that matter
            optimal_utility=benchmarks[:, 0],  # (N,)
            oracle_greedy_utility=benchmarks[:, 1],  # (N,)
            optimal_kind=kind,
            noise=self._noise,  # (N,)
            response=state.tokens,  # (N, L)
            response_length=state.lengths,  # (N,)
            optimal_response=pool_responses[state.queries],  # (N, L)
            response_embedding=embedding,
            ended=terminated,
        )

    def _pool_benchmarks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every query's exact optimum and oracle greedy utility ``(Q, 2)`` float64, and optimal response ``(Q, L)``.

        The single env's :class:`PoolBenchmarks` (the problem's own :meth:`TokenizedProblem.optimal`
        and :meth:`TokenizedProblem.oracle_greedy` of the whole pool), put on the device once.
        """
        if self._benchmark_utilities is None or self._benchmark_responses is None:
            benchmarks = PoolBenchmarks.from_problem(self.problem)
            utilities = np.stack([benchmarks.optimal_utility, benchmarks.oracle_greedy_utility], axis=1)  # (Q, 2)
            self._benchmark_utilities = torch.tensor(utilities, dtype=torch.float64, device=self.device)
            self._benchmark_responses = torch.tensor(benchmarks.optimal_responses, device=self.device)  # (Q, L)
        return self._benchmark_utilities, self._benchmark_responses

    def _to_backend(self, value: torch.Tensor) -> Any:
        """A tensor as the backend's array type."""
        if self.array_backend == "torch":
            return value
        return value.cpu().numpy()
