"""The native vector env shared by every tokenized bandit: a Gymnasium shell over one round batch of N rows."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from numbers import Integral
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from tokenized_bandit_gym.core.round_buffer import RoundBuffer
from tokenized_bandit_gym.core.validation import check_choice, check_int, check_memory, check_reset_seed
from tokenized_bandit_gym.envs.captured_vector_step import STEP_MODES, CapturedVectorEnvStep
from tokenized_bandit_gym.envs.env_contract import forced_and_refused
from tokenized_bandit_gym.envs.pairwise_feedback import PairwiseRows
from tokenized_bandit_gym.envs.round_batch import DeviceRoundBatch, HostRoundBatch, RoundBatch
from tokenized_bandit_gym.envs.synthetic_config import SyntheticBanditConfig
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv
from tokenized_bandit_gym.host_array import as_host_array

if TYPE_CHECKING:
    from tokenized_bandit_gym.envs.language_model_bandit_env import LanguageModelBanditEnv
    from tokenized_bandit_gym.envs.language_model_config import LanguageModelEnvConfig

ARRAY_BACKENDS = ("numpy", "torch")

VectorArray = np.ndarray | torch.Tensor
"""What the vector env returns per batch of rows: NumPy arrays (``array_backend="numpy"``) or tensors (``"torch"``)."""
VectorObservation = dict[str, np.ndarray] | dict[str, torch.Tensor]
"""A batch of observations: one array (or tensor) per key of the observation space, ``(N, ...)`` each."""


def vector_env_memory_bytes(num_envs: int, single_observation_space: spaces.Dict, round_buffer: int) -> int:
    """A lower bound of the bytes a native vector env of ``num_envs`` rows allocates when it is made.

    Counts, per row: the observation (once in the round batch, once returned), the batched
    observation space's ``low`` and ``high`` (each at least as large as the observation), and the
    rounds drawn ahead (``round_buffer`` query indices and noise draws, 8 bytes each).
    """
    check_int("round_buffer", round_buffer, minimum=2)
    row = sum(
        int(np.prod(space.shape or ())) * np.dtype(space.dtype).itemsize
        for space in single_observation_space.spaces.values()
    )
    return num_envs * (4 * row + 16 * round_buffer)


class TokenizedBanditVectorEnv(VectorEnv):
    """N independent rounds of one tokenized bandit instance, stepped as one batch of the core.

    Sub-env i is exactly the single env (:attr:`single_env_class`) reset with seed ``s_i``: the
    same instance (built once, by the single env's own constructor), the same query and noise
    streams (:class:`~tokenized_bandit_gym.core.round_buffer.RoundBuffer`), the same dynamics
    (the core called with batch N instead of 1), the same forced EOS and the same info entries.
    This class is the Gymnasium shell only: seeding, the action check with the forced EOS
    (the env contract's), the autoreset and the infos; the rounds are a
    :class:`~tokenized_bandit_gym.envs.round_batch.RoundBatch` of N rows that the single env
    builds (:meth:`TokenizedBanditEnv.round_batch`), so a subclass names its single env class
    and nothing else (the LLM vector env adds its keywords).

    Autoreset (``autoreset_mode``, exposed as :attr:`autoreset_mode` and
    ``metadata["autoreset_mode"]``, with the semantics of Gymnasium's own vector envs):

    * ``NEXT_STEP`` (the default): the step that ends sub-env i's round returns its final
      observation, the reward and ``terminated[i] = True``; on the next ``step`` that sub-env
      ignores its action, starts a new round and returns its first observation, reward 0,
      ``terminated[i] = False`` and the new round's reset info.
    * ``SAME_STEP``: the step that ends the round returns the reward, ``terminated[i] = True``,
      the new round's first observation and reset info, and the ended round's in
      ``info["final_obs"][i]`` and ``info["final_info"]`` (masked by ``_final_obs`` /
      ``_final_info``; both present in steps where some round ended). What TorchRL takes.
    * ``DISABLED``: a sub-env whose round ended stays ended (stepping it raises) until
      ``reset(options={"reset_mask": mask})`` restarts the masked sub-envs. What TorchRL prefers.

    Infos follow the env contract's schema (:class:`~tokenized_bandit_gym.envs.env_contract.InfoSchema`):
    every step has the same keys, each an ``(N, ...)`` array with its ``_key`` mask (True on
    every sub-env, as Gymnasium's vector envs stack an env whose info always has the key):
    ``query_index``, ``forced_eos``, ``round_ended`` and the round summary (``utility``,
    ``optimal_utility``, ``regret``, ``oracle_greedy_utility``, ``noise``, ``response`` and
    ``optimal_response`` ``(N, L)`` padded with EOS, ``response_length`` ``(N,)``, and
    ``response_embedding`` for TLB), set on the rows whose round ended in this step and holding
    the schema's fill values elsewhere. No entry is a string; the benchmark's kind is
    :attr:`optimal_kind`.

    Pairwise feedback (the single env's ``feedback="pairwise"``): a sub-env's round is two
    responses to one query, decoded one after the other, as in the single env; when a row's
    first response is complete the row restarts on the same query and round (no termination),
    and the step that completes its second response ends the round with the preference bit as
    reward and the comparison's entries (``utilities`` ``(N, 2)``, ``preferred``, ``regret_weak``).

    Array backends: ``array_backend="numpy"`` (default) returns NumPy arrays; ``"torch"``
    returns tensors on the instance's ``device`` and takes actions as tensors there. With the
    NumPy backend and a synthetic instance on the CPU, the rounds are a
    :class:`~tokenized_bandit_gym.envs.round_batch.HostRoundBatch` (the same core calls, once per
    step, with everything of size N in NumPy, where an operation costs a microsecond instead of
    a torch dispatch's ten); otherwise a
    :class:`~tokenized_bandit_gym.envs.round_batch.DeviceRoundBatch`, whose step reads nothing
    back to the host but one flag (whether any action is invalid), plus the round buffer's
    cursors once every ``round_buffer - 1`` steps. The tests hold the two equal.

    Step mode (``step_mode``): ``"eager"`` (the default) runs the step as above. ``"captured"``
    runs everything after the action check as one static-shape step
    (:class:`~tokenized_bandit_gym.envs.captured_vector_step.StaticVectorEnvStep`), captured once
    as a CUDA graph on a CUDA device and replayed each step (eager elsewhere, or where the capture
    fails: one ``RuntimeWarning``). Observations, rewards, flags and infos equal the eager step's
    bit for bit, in every autoreset mode. It needs the torch backend and a synthetic instance
    without pairwise feedback (anything else is a ``ValueError`` naming it, at construction);
    ``docs/PERFORMANCE.md`` has its speed against the eager step's.

    Args:
        num_envs: N >= 1.
        array_backend: ``"numpy"`` or ``"torch"``.
        round_buffer: rounds drawn ahead per sub-env (a device copy every ``round_buffer - 1``
            steps).
        autoreset_mode: ``AutoresetMode`` ``NEXT_STEP``, ``SAME_STEP`` or ``DISABLED`` (or its value).
        step_mode: ``"eager"`` or ``"captured"`` (above).
        **env_kwargs: the single env's keywords (``device`` places the instance and, with the
            torch backend, every returned tensor).
    """

    single_env_class: ClassVar[type[TokenizedBanditEnv] | type[LanguageModelBanditEnv]]
    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    single_observation_space: spaces.Dict
    single_action_space: spaces.Discrete
    _template: TokenizedBanditEnv | LanguageModelBanditEnv

    def __init__(
        self,
        num_envs: int,
        array_backend: str = "numpy",
        round_buffer: int = 256,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        step_mode: str = "eager",
        **env_kwargs: Any,
    ) -> None:
        self.num_envs = check_int("num_envs", num_envs, minimum=1)
        self.step_mode = check_choice("step_mode", step_mode, STEP_MODES)
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self.array_backend = check_choice("array_backend", array_backend, ARRAY_BACKENDS)
        if env_kwargs.get("render_mode") is not None:
            raise ValueError(f"the vector env does not render; got render_mode={env_kwargs['render_mode']!r}")
        template = self.single_env_class(**env_kwargs)
        self._template = template  # the single env whose instance (and tables) every sub-env shares
        self.problem = template.problem
        self.noise_model = template.noise_model
        self.strict_actions = template.strict_actions
        self.optimal_kind = template.optimal_kind
        self.single_observation_space = template.observation_space
        self.single_action_space = template.action_space
        needed = vector_env_memory_bytes(self.num_envs, self.single_observation_space, round_buffer)
        check_memory(f"num_envs={self.num_envs} (of {type(self).__name__})", needed)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.device = self.problem.device
        self._on_cpu = self.device.type == "cpu"  # host checks are free here, a sync on an accelerator
        self._num_actions = int(self.single_action_space.n)
        self._round_buffer = RoundBuffer(
            self.num_envs,
            self.problem.num_queries,
            self.noise_model,
            check_int("round_buffer", round_buffer, minimum=2),
            self.device,
        )
        self.rounds = self._make_round_batch(template)
        self.feedback = template.feedback
        self._pairwise: PairwiseRows | None = None
        if template.feedback_channel.pairwise:
            self._pairwise = PairwiseRows(
                self.num_envs,
                self.problem.max_length,
                self.problem.eos_token_id,
                template.feedback_channel.temperature,
                None if self.rounds.on_host else self.device,
            )
        self._autoreset: Any = self._all_rows(False)  # (N,) the rows whose round ended in the last step
        self._started = False
        # A host batch whose carry is a table steps in two compiled calls (NEXT_STEP and DISABLED; no pairwise)
        self._table_steps = (
            isinstance(self.rounds, HostRoundBatch)
            and self.rounds.has_carry_table
            and self._pairwise is None
            and self.autoreset_mode != AutoresetMode.SAME_STEP
        )
        self._table_info_keys: tuple[str, ...] = ()  # the table path's info keys, then their _key masks
        if self._table_steps and isinstance(self.rounds, HostRoundBatch):
            keys = ("query_index", "forced_eos", *self.rounds.summary_keys)
            self._table_info_keys = (*keys, *_mask_keys(keys))
        self._captured: Any = None  # step_mode="captured": the captured step (a CapturedVectorEnvStep for these)
        if self.step_mode == "captured":
            self._captured = self._make_captured_step()

    def _make_captured_step(self) -> Any:
        """The captured step of ``step_mode="captured"``, or ``ValueError`` naming what it cannot serve.

        The LLM vector env overrides it (its rounds' advance is what it captures).
        """
        if self.array_backend != "torch":
            raise ValueError(f"step_mode='captured' needs array_backend='torch', got {self.array_backend!r}")
        if self._pairwise is not None:
            raise ValueError(f"step_mode='captured' does not serve feedback={self.feedback!r}; use step_mode='eager'")
        if not isinstance(self.rounds, DeviceRoundBatch):
            raise ValueError(f"step_mode='captured' does not serve {type(self).__name__}; use step_mode='eager'")
        return CapturedVectorEnvStep(self.rounds, self._round_buffer, self.autoreset_mode)

    def _make_round_batch(self, template: TokenizedBanditEnv | LanguageModelBanditEnv) -> RoundBatch[Any]:
        """The N-row round batch of ``template``'s instance (the LLM vector env passes its own keywords)."""
        return template.round_batch(self.num_envs, host=self.array_backend == "numpy")

    @property
    def config(self) -> SyntheticBanditConfig | LanguageModelEnvConfig:
        """The single env's config every sub-env plays (made from the keywords and ``config=``)."""
        return self._template.config

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
    ) -> tuple[VectorObservation, dict[str, Any]]:
        """Start a new round on every sub-env, or on those ``options["reset_mask"]`` says.

        Args:
            seed: ``None`` (continue each sub-env's streams; draw fresh seeds from
                :attr:`np_random` the first time), an ``int`` s (sub-env i gets ``s + i``, as
                in ``SyncVectorEnv``), a sequence of N ints or Nones, or a 1-D integer array of N
                seeds; NumPy integers count as ints, bools are refused. With a reset mask only
                the masked sub-envs' seeds are read.
            options: ``{"reset_mask": (N,) bool}`` resets only the masked sub-envs (what
                ``autoreset_mode=DISABLED`` asks for, as in Gymnasium's own vector envs); other
                options are ignored, as in the single env.

        Returns:
            The batched first observations (the other sub-envs' as they were) and the infos of
            the env contract's schema, ``_key`` True on the reset sub-envs.

        Raises:
            TypeError: ``reset_mask`` is not a bool NumPy array.
            ValueError: ``reset_mask`` has the wrong shape or no True entry.
        """
        reset_rows = self._reset_mask(options)
        seeds = self._row_seeds(seed)
        if reset_rows is None:
            super().reset(seed=seeds[0] if isinstance(seed, Integral) else None)
            reset_rows = np.ones(self.num_envs, dtype=bool)
        fresh_rows: list[int] = []
        fresh_seeds: list[int] = []
        for row in np.flatnonzero(reset_rows).tolist():
            row_seed = seeds[row]
            if row_seed is not None:
                fresh_rows.append(row)
                fresh_seeds.append(row_seed)
            elif not self._round_buffer.is_seeded(row):
                fresh_rows.append(row)
                fresh_seeds.append(int(self.np_random.integers(2**63 - 1)))
        self._round_buffer.seed(fresh_rows, fresh_seeds)
        batch = self.rounds
        continuing: np.ndarray | torch.Tensor = reset_rows.copy()
        continuing[fresh_rows] = False
        restarting: np.ndarray | torch.Tensor = reset_rows
        if not batch.on_host:
            continuing = torch.from_numpy(continuing).to(self.device)
            restarting = torch.from_numpy(reset_rows).to(self.device)
        self._round_buffer.advance(continuing)
        self._restart(restarting)
        self._autoreset = self._autoreset & ~restarting
        self._started = True
        infos = self._step_infos(batch.pending_summary(), self._all_rows(False), restarting)
        observed = self._observe()
        if self._captured is not None:
            self._captured.adopt()  # the rounds restarted eagerly: the captured step's tensors take them
        return observed, self._infos_to_backend(infos)

    def step(
        self, actions: VectorArray | Sequence[int]
    ) -> tuple[VectorObservation, VectorArray, VectorArray, VectorArray, dict[str, Any]]:
        """Append one token per sub-env; sub-envs whose round ended restart as :attr:`autoreset_mode` says.

        Args:
            actions: ``(N,)`` integer token ids (NumPy array, sequence or tensor). Entries of
                sub-envs that autoreset in this step (``NEXT_STEP``) are range-checked and
                otherwise ignored.

        Raises:
            ValueError: before :meth:`reset`; wrong shape; an action out of ``[0, n)``; a masked
                action (always before position L, and at L too when ``strict_actions``); with
                ``DISABLED``, a sub-env whose round ended and was not reset since.
            TypeError: a non-integer dtype (bools and floats included).
        """
        if not self._started:
            raise ValueError("step() called before reset(): call reset() to start the rounds")
        batch = self.rounds
        on_host = batch.on_host
        mode = self.autoreset_mode
        if mode == AutoresetMode.DISABLED and bool(self._autoreset.any()):
            ended = np.flatnonzero(as_host_array(self._autoreset)).tolist()
            raise ValueError(
                f"sub-env(s) {ended[:10]} ended their round and were not reset: with autoreset_mode DISABLED, "
                "call reset(options={'reset_mask': mask}) on them first"
            )
        if self._table_steps:
            return self._step_on_carry_table(self._action_array(actions))
        tokens = self._action_array(actions) if on_host else self._action_tensor(actions)  # (N,)
        stepping = ~self._autoreset  # (N,)
        allowed, out_of_range = batch.allowed(tokens)  # (N,) each
        forced_eos, refused = forced_and_refused(
            allowed, batch.lengths, stepping, self.problem.max_length, self.strict_actions
        )  # (N,) each
        if _any(out_of_range) or _any(refused):
            self._raise_invalid(tokens, out_of_range, refused)
        if self._captured is not None:
            assert isinstance(tokens, torch.Tensor)  # the captured mode has the torch backend's rows
            return self._step_captured(tokens, forced_eos)
        batch.advance(batch.forced_actions(tokens, forced_eos), stepping)
        terminated = stepping & batch.finished  # (N,)
        if self._pairwise is not None:
            terminated = self._second_responses(terminated)
        # The NumPy backend decides on the host whether some round ended; the torch one always summarises.
        some_ended = self.array_backend == "torch" or _any(terminated)
        summary = batch.round_summary(terminated) if some_ended else batch.pending_summary()
        if self._pairwise is not None:
            rewards = self._pairwise.finish(summary, terminated, batch.noise)[0] if some_ended else None
            if rewards is None:
                rewards = (
                    np.zeros(self.num_envs)
                    if on_host
                    else torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)
                )
        elif on_host:
            rewards = (
                np.where(terminated, summary["utility"] + batch.noise, 0.0) if some_ended else np.zeros(self.num_envs)
            )
        elif some_ended:
            rewards = torch.where(terminated, summary["utility"] + batch.noise, 0.0)  # (N,)
        else:
            rewards = torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)
        if mode == AutoresetMode.SAME_STEP:
            infos = self._restart_ended(terminated, summary, forced_eos)
        else:
            self._start_next_rounds(self._autoreset)  # NEXT_STEP: the rows that ended last step (none when DISABLED)
            self._autoreset = terminated
            infos = self._step_infos(summary, forced_eos, self._all_rows(True))
        return (
            self._observe(),
            self._to_backend(rewards),
            self._to_backend(self._copy(terminated)),
            self._to_backend(self._all_rows(False)),
            self._infos_to_backend(infos),
        )

    def _step_on_carry_table(
        self, tokens: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """:meth:`step` on a host batch whose carry is a table: the same contract in two compiled calls.

        The action check and the advance (:meth:`HostRoundBatch.begin_table_step`), the round
        buffer's next rounds for the rows that ended in the last step, then the round summary,
        the restarts and the observation (:meth:`HostRoundBatch.end_table_step`): every output
        a row of a few new buffers, none shared with another output or the state.

        Args:
            tokens: ``(N,)`` int64 the actions (checked here; an invalid one raises before any change).
        """
        batch = self.rounds
        assert isinstance(batch, HostRoundBatch)
        restarting = self._autoreset  # (N,) the rows that ended in the last step, restarted now
        num_masks = len(self._table_info_keys) // 2
        flags, invalid, num_ended = batch.begin_table_step(tokens, ~restarting, self.strict_actions, num_masks)
        if invalid:
            allowed, out_of_range = batch.allowed(tokens)
            refused = forced_and_refused(
                allowed, batch.lengths, ~restarting, self.problem.max_length, self.strict_actions
            )[1]
            self._raise_invalid(tokens, out_of_range, refused)
        self._round_buffer.advance(restarting)
        index = restarting.nonzero()[0]  # (R,)
        new_queries, new_noise = self._round_buffer.current_rows(index)
        values, ints, token_rows, embedding, query, candidate_tokens, action_mask, embeddings = batch.end_table_step(
            flags, num_ended, index, new_queries, new_noise, restarting
        )
        summary = batch.summary_entries(values, ints, token_rows, embedding, flags[2])
        infos = dict(zip(self._table_info_keys, (ints[0], flags[0], *summary.values(), *flags[4:]), strict=True))
        observation = batch.observation_of(query, candidate_tokens, action_mask, embeddings, ints, token_rows[2])
        return observation, values[5], flags[1], flags[3], infos

    def _restart_ended(self, terminated: Any, summary: dict[str, Any], forced_eos: Any) -> dict[str, Any]:
        """``SAME_STEP``: restart the rows ``terminated`` ``(N,)`` now; the step's infos with their final ones.

        As in Gymnasium's own vector envs: the ended rows report their new round's reset info,
        and ``final_obs`` (an object array of N observation dicts, None on the other rows) and
        ``final_info`` (the step's infos, ``_key`` True on the ended rows) carry what they ended
        with; both are present in steps where some round ended.
        """
        batch = self.rounds
        some_ended = _any(terminated)
        if some_ended:
            final_info = self._infos_to_backend(self._step_infos(summary, forced_eos, terminated))
            final_observation = self._observe()
            self._start_next_rounds(terminated)
        self._autoreset = self._all_rows(False)
        infos = self._step_infos(batch.pending_summary(), forced_eos & ~terminated, self._all_rows(True))
        if some_ended:
            ended = np.flatnonzero(as_host_array(terminated))  # (R,)
            # one gather per key, then the R rows as views of it: a per-row index of N-row tensors cost
            # ~10 us of Python each (30 ms a step at N = 4,096 on an H200)
            ended_rows = {key: _take_rows(value, ended) for key, value in final_observation.items()}
            self._add_final_entries(infos, ended, ended_rows, final_info, terminated)
        return infos

    def _add_final_entries(
        self, infos: dict[str, Any], ended: np.ndarray, ended_rows: dict[str, Any], final_info: Any, terminated: Any
    ) -> None:
        """``SAME_STEP``: put ``final_obs`` (from ``ended_rows``, ``(R, ...)`` each) and ``final_info`` into ``infos``.

        Args:
            infos: the step's infos (updated).
            ended: ``(R,)`` the rows whose round ended, ascending.
            ended_rows: the final observation of those rows, row r of each entry that of row ``ended[r]``.
            final_info: the infos of the rounds that ended.
            terminated: ``(N,)`` bool, the rows whose round ended.
        """
        final_rows = {key: list(value) for key, value in ended_rows.items()}  # the R rows as views
        final_obs = np.full(self.num_envs, None, dtype=object)
        for position, row in enumerate(ended.tolist()):
            final_obs[row] = {key: rows[position] for key, rows in final_rows.items()}
        infos["final_obs"], infos["_final_obs"] = final_obs, self._copy(terminated)
        infos["final_info"], infos["_final_info"] = final_info, self._copy(terminated)

    def _step_captured(
        self, tokens: torch.Tensor, forced_eos: torch.Tensor
    ) -> tuple[VectorObservation, VectorArray, VectorArray, VectorArray, dict[str, Any]]:
        """:meth:`step` after the action check in ``step_mode="captured"``: the eager step's outputs, captured.

        The captured step advances, summarises, restarts and observes; here the infos are assembled as the
        eager step assembles them (``SAME_STEP``'s ``final_obs`` rows read the host, as there).
        """
        restarting = self._autoreset  # (N,) NEXT_STEP: the rows that ended in the last step
        rewards, terminated, ended_queries, summary, observed = self._captured(tokens, restarting)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            infos = self._step_infos(self.rounds.pending_summary(), forced_eos & ~terminated, self._all_rows(True))
            if _any(terminated):
                final_info = self._step_infos(summary, forced_eos, terminated, query_index=ended_queries)
                ended = np.flatnonzero(as_host_array(terminated))  # (R,)
                rows = torch.as_tensor(ended, device=self.device)
                final_rows = self._captured.static.final_observations(rows, ended_queries, summary)
                self._add_final_entries(infos, ended, final_rows, final_info, terminated)
            self._autoreset = self._all_rows(False)
        else:
            self._autoreset = terminated
            infos = self._step_infos(summary, forced_eos, self._all_rows(True))
        return observed, rewards, self._copy(terminated), self._all_rows(False), infos

    def _start_next_rounds(self, rows: Any) -> None:
        """Advance the round buffer on ``rows`` ``(N,)`` bool and start their next rounds (none on the CPU: no work)."""
        self._round_buffer.advance(rows)
        if not self._on_cpu or _any(rows):
            self._restart(rows)

    def _restart(self, rows: Any) -> None:
        """Start new rounds on ``rows`` ``(N,)`` bool with their current draws (no first response yet).

        On the host only the restarting rows are read from the round buffer and written.
        """
        if isinstance(self.rounds, HostRoundBatch):
            index = rows.nonzero()[0]  # (R,)
            self.rounds.restart_rows(index, *self._round_buffer.current_rows(index))
        else:
            self.rounds.restart(rows, *self._round_buffer.current())
        if self._pairwise is not None:
            self._pairwise.start(rows)

    def _second_responses(self, completed: Any) -> Any:
        """Pairwise feedback: keep the first responses ``completed`` ``(N,)`` and restart those rows' second.

        Returns:
            ``(N,)`` bool, the rows whose round ended: their second response is complete.
        """
        pairwise, batch = self._pairwise, self.rounds
        assert pairwise is not None
        first_done = completed & ~pairwise.deciding_second  # (N,)
        if not self._on_cpu or first_done.any():
            pairwise.keep_first(first_done, batch.round_summary(first_done))
            batch.restart(first_done, self._copy(batch.queries), self._copy(batch.noise))  # the same round again
        return completed & ~first_done

    def _step_infos(
        self, summary: dict[str, Any], forced_eos: Any, present: Any, query_index: Any = None
    ) -> dict[str, Any]:
        """The infos of the env contract's schema: ``query_index``, ``forced_eos`` and the round summary.

        Every entry is new and paired with its ``_key`` mask, a copy of ``present`` ``(N,)`` (the
        sub-envs that report it, as Gymnasium's vector envs mark them). ``query_index`` is a copy of
        the batch's queries unless given (a new ``(N,)`` array or tensor).
        """
        if query_index is None:
            query_index = self._copy(self.rounds.queries)
        infos: dict[str, Any] = {"query_index": query_index, "forced_eos": forced_eos, **summary}
        keys = tuple(infos)
        if isinstance(present, np.ndarray):  # a copy per key (cheaper than views of one buffer)
            infos.update((mask_key, present.copy()) for mask_key in _mask_keys(keys))
        else:
            masks = present.expand(len(keys), self.num_envs).clone()
            infos.update(zip(_mask_keys(keys), masks, strict=True))
        return infos

    def _infos_to_backend(self, infos: dict[str, Any]) -> dict[str, Any]:
        """``infos`` as the backend's arrays (tensors of a batch off the host become NumPy arrays)."""
        if self.rounds.on_host or self.array_backend == "torch":
            return infos
        return {key: self._to_backend(value) for key, value in infos.items()}

    def action_masks(self) -> VectorArray:
        """Allowed actions now, ``(N, k)`` bool (array or tensor by backend)."""
        return self._to_backend(self._copy(self.rounds.mask))

    # ------------------------------------------------------------------ the round batch
    def _observe(self) -> dict[str, Any]:
        """The batch's observation in the observation space's key order, as the backend's arrays."""
        observed = self.rounds.observe()  # in the space's key order (the contract's)
        if self._pairwise is not None:
            observed = self._pairwise.observation(observed)
        if self.rounds.on_host or self.array_backend == "torch":
            return observed
        return {key: self._to_backend(value) for key, value in observed.items()}

    def _all_rows(self, value: bool) -> Any:
        """``(N,)`` bool filled with ``value``, as the batch's rows (a NumPy array or a tensor on the device)."""
        if self.rounds.on_host:
            rows = np.empty(self.num_envs, dtype=bool)
            rows.fill(value)
            return rows
        return torch.full((self.num_envs,), value, dtype=torch.bool, device=self.device)

    @staticmethod
    def _copy(rows: Any) -> Any:
        """A new array or tensor equal to ``rows`` (what the env hands out is never its state)."""
        return rows.copy() if isinstance(rows, np.ndarray) else rows.clone()

    # ------------------------------------------------------------------ helpers
    def _reset_mask(self, options: dict[str, Any] | None) -> np.ndarray | None:
        """``options["reset_mask"]`` validated as Gymnasium's vector envs do, or None without one."""
        if options is None or "reset_mask" not in options:
            return None
        mask = options["reset_mask"]
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise TypeError(f"options['reset_mask'] must be a NumPy bool array, got {mask!r}")
        if mask.shape != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}")
        if not mask.any():
            raise ValueError(f"options['reset_mask'] must hold at least one True entry, got {mask}")
        return mask.copy()

    def _row_seeds(self, seed: int | Sequence[int | None] | np.ndarray | None) -> list[int | None]:
        """Per-sub-env seeds from ``reset``'s ``seed`` argument, each checked by ``check_reset_seed``."""
        if seed is None or isinstance(seed, (bool, np.bool_, Integral)):
            first = check_reset_seed(seed)
            return [None if first is None else first + row for row in range(self.num_envs)]
        if isinstance(seed, np.ndarray):
            if seed.ndim != 1 or seed.dtype.kind not in "iu":
                raise TypeError(f"a seed array must be 1-D of integers, got dtype {seed.dtype}, shape {seed.shape}")
            seed = seed.tolist()
        if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence):
            raise TypeError(f"seed must be None, an int or a sequence of {self.num_envs} ints, got {seed!r}")
        if len(seed) != self.num_envs:
            raise ValueError(f"seed must have one entry per sub-env ({self.num_envs}), got {len(seed)}: {seed!r}")
        return [check_reset_seed(value, f"seed[{row}]") for row, value in enumerate(seed)]

    def _action_tensor(self, actions: Any) -> torch.Tensor:
        """``actions`` as an ``(N,)`` int64 tensor on the device; raises on shape or dtype."""
        if not isinstance(actions, torch.Tensor):
            return torch.from_numpy(self._action_array(actions)).to(self.device)
        if actions.dtype == getattr(torch, "uint64", None):  # NumPy checks its range
            return torch.from_numpy(self._action_array(actions.cpu().numpy())).to(self.device)
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
            if isinstance(actions, (list, tuple)) and all(_is_integer(value) for value in actions):
                self._check_action_shape((len(actions),))  # Python ints beyond int64: NumPy made them floats
                self._raise_out_of_range(list(actions))
            raise TypeError(f"actions must be integer token indices, got dtype {array.dtype}: {actions!r}")
        self._check_action_shape(array.shape)
        if array.dtype == np.uint64 and array.size and int(array.max()) > np.iinfo(np.int64).max:
            self._raise_out_of_range(array.tolist())  # named as passed, not as int64 would hold it
        return np.ascontiguousarray(array, dtype=np.int64)

    def _check_action_shape(self, shape: tuple[int, ...]) -> None:
        """Raise ``ValueError`` unless ``shape`` is ``(N,)``."""
        if shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), one token per sub-env, got shape {shape}")

    def _raise_invalid(self, tokens: Any, out_of_range: Any, refused: Any) -> None:
        """Raise ``ValueError`` naming the first invalid action and its sub-env (``(N,)`` arrays or tensors)."""
        tokens, out_of_range, refused = (as_host_array(value) for value in (tokens, out_of_range, refused))
        if out_of_range.any():
            self._raise_out_of_range(tokens.tolist())
        row = int(np.flatnonzero(refused)[0])
        allowed = np.flatnonzero(as_host_array(self.rounds.mask)[row]).tolist()
        length = int(as_host_array(self.rounds.lengths)[row])
        raise ValueError(
            f"action {int(tokens[row])} of sub-env {row} is masked at position {length + 1}: "
            f"allowed actions are {allowed}"
        )

    def _raise_out_of_range(self, actions: list[int]) -> None:
        """Raise ``ValueError`` naming the first action outside ``[0, k)`` (Python ints, as the caller passed them)."""
        bad_range = [row for row, action in enumerate(actions) if not 0 <= action < self._num_actions]
        row = bad_range[0]
        raise ValueError(
            f"action {int(actions[row])} of sub-env {row} is out of range: it must lie in [0, {self._num_actions}) "
            f"({len(bad_range)} sub-env(s) out of range: {bad_range[:10]})"
        )

    def _to_backend(self, value: Any) -> Any:
        """A tensor as the backend's array type (NumPy arrays and strings pass as they are).

        A CPU tensor becomes a view of its memory: the shell hands out only new tensors (it
        copies what it takes from the batch's state), so no view reaches the env's state.
        """
        if self.array_backend == "torch" or not isinstance(value, torch.Tensor):
            return value
        return value.cpu().numpy()


def _any(rows: Any) -> bool:
    """Whether some entry of ``rows`` ``(N,)`` is true (a NumPy array: ``count_nonzero``, 3x cheaper than ``any``)."""
    return bool(np.count_nonzero(rows)) if isinstance(rows, np.ndarray) else bool(rows.any())


@functools.lru_cache(maxsize=64)
def _mask_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The ``_key`` mask names of the info ``keys`` (the same every step: the schema's), built once."""
    return tuple(f"_{key}" for key in keys)


def _autoreset_mode(mode: object) -> AutoresetMode:
    """``mode`` as an :class:`AutoresetMode` (its value, e.g. ``"SameStep"``, is accepted), or ``ValueError``."""
    if isinstance(mode, AutoresetMode):
        return mode
    try:
        return AutoresetMode(mode)
    except ValueError:
        choices = [member.value for member in AutoresetMode]
        raise ValueError(f"autoreset_mode must be an AutoresetMode or one of {choices}, got {mode!r}") from None


def _is_integer(value: object) -> bool:
    """Whether ``value`` is an integer (Python or NumPy), not a bool."""
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))


def _take_rows(value: Any, rows: np.ndarray) -> Any:
    """``value[rows]`` for a NumPy array or a torch tensor (on any device): ``(R, ...)`` from ``(N, ...)``."""
    if isinstance(value, np.ndarray):
        return value[rows]
    return value[torch.as_tensor(rows, device=value.device)]
