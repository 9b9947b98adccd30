"""The synthetic vector env's ``step_mode="captured"``: its step as one static-shape step, a CUDA graph on CUDA.

:class:`StaticVectorEnvStep` extends :class:`~tokenized_bandit_gym.envs.static_round_step.StaticRoundStep` to
everything the env contract's step returns, in any autoreset mode: the rewards, ``terminated``, the round
summary of the rounds that end (the info entries), the queries they ended on (``final_info``'s
``query_index``) and the next observation. :class:`CapturedVectorEnvStep` runs it in a
:class:`~tokenized_bandit_gym.core.cuda_graph_step.CapturedStep` (one graph replay a step on CUDA, eager
elsewhere) with the round buffer's next rounds as inputs. The vector env keeps what reads the host: the action
check, the ``final_obs`` rows, the round buffer's refills. The tests hold every output equal to the eager
step's, bit for bit, on every synthetic id and autoreset mode.
"""

from __future__ import annotations

import dataclasses

import torch
from gymnasium.vector import AutoresetMode

from tokenized_bandit_gym.core.cuda_graph_step import CapturedStep
from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.round_buffer import RoundBuffer
from tokenized_bandit_gym.envs.env_contract import observation, rows_observation
from tokenized_bandit_gym.envs.round_batch import DeviceRoundBatch
from tokenized_bandit_gym.envs.static_round_step import StaticRoundStep, _fields

STEP_MODES = ("eager", "captured")
"""The vector envs' ``step_mode``: ``"eager"`` (the default) or ``"captured"`` (a static step, a CUDA graph on CUDA)."""


class StaticVectorEnvStep(StaticRoundStep):
    """The vector env's whole step on a :class:`DeviceRoundBatch`, static shapes, state written in place.

    ``SAME_STEP`` restarts the rows whose round ends in the step; ``NEXT_STEP`` and ``DISABLED`` restart the rows
    given as ``restarting`` (the ones that ended in the last step: none under ``DISABLED``), after stepping
    every row (theirs take a throwaway token), as the eager step does.

    Args:
        rounds: the batch; its state, noise and mask move into tensors this step owns.
        autoreset_mode: the vector env's.

    Attributes:
        same_step: whether the rows that end restart in the same step (``SAME_STEP``).
        summary_keys: the round summary's keys, in the order :meth:`env_step` returns their values.
        observation_keys: the observation's keys, in the order :meth:`env_step` returns their values.
    """

    def __init__(self, rounds: DeviceRoundBatch, autoreset_mode: AutoresetMode) -> None:
        super().__init__(rounds)
        self.same_step = autoreset_mode == AutoresetMode.SAME_STEP
        self.has_embeddings = rounds.tables.has_embeddings
        rows = rounds.num_rows
        nobody = torch.zeros(rows, dtype=torch.bool, device=self._noise.device)
        self.summary_keys = tuple(rounds.round_summary(nobody))  # builds the pool's benchmarks before any capture
        self.observation_keys = tuple(
            observation(
                query=None,
                query_length=None,
                response=None,
                length=None,
                candidate_tokens=None,
                action_mask=None,
                candidate_embeddings=True if self.has_embeddings else None,
            )
        )

    def adopt(self) -> None:
        """Take the batch's state, noise and mask into this step's tensors after the env restarted rounds eagerly."""
        rounds = self.rounds
        for buffer, value in zip(self._state, _fields(rounds.state), strict=True):
            if buffer is not value:
                buffer.copy_(value)
        for buffer, value in ((self._noise, rounds.noise), (self._mask, rounds.mask)):
            if buffer is not value:
                buffer.copy_(value)
        rounds.state = DecodingState(*self._state)
        rounds.noise, rounds.mask = self._noise, self._mask

    def env_step(
        self,
        tokens: torch.Tensor,
        restarting: torch.Tensor,
        next_queries: torch.Tensor,
        next_noise: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        """Step every row on ``tokens`` ``(N,)`` (checked by the caller); restart rows on the next rounds given.

        Args:
            tokens: ``(N,)`` int64 the actions; a masked one becomes EOS (the caller refused those it must).
            restarting: ``(N,)`` bool the rows that restart after the step (``NEXT_STEP``; read only then).
            next_queries: ``(N,)`` int64 each row's next query (read on the rows that restart).
            next_noise: ``(N,)`` float64 each row's next noise.

        Returns:
            New tensors: ``rewards`` ``(N,)`` float64, ``terminated`` ``(N,)`` bool, the queries the step's
            rounds were on ``(N,)``, the round summary's values (:attr:`summary_keys`), then the next
            observation's (:attr:`observation_keys`).
        """
        rounds = self.rounds
        problem, state = rounds.problem, rounds.state
        num_actions = self._mask.shape[1]
        allowed = self._mask.gather(1, tokens.clamp(0, num_actions - 1)[:, None])[:, 0]  # (N,)
        chosen = torch.where(allowed, tokens, self._eos)  # (N,) the forced EOS
        in_range = dataclasses.replace(state, lengths=state.lengths.clamp(max=problem.max_length - 1))
        extended = problem.extend(in_range, chosen)  # DeviceRoundBatch.advance
        terminated = extended.finished if self.same_step else extended.finished & ~restarting  # (N,)
        summary = rounds.summary_of(extended, self._noise, terminated)
        rewards = torch.where(terminated, summary["utility"] + self._noise, 0.0)  # (N,) as the eager step adds
        ended_queries = extended.queries.clone()  # (N,) the restart overwrites the state's
        restarted = terminated if self.same_step else restarting
        self._restart(extended, restarted, next_queries, next_noise)
        if not self.same_step:  # the rows that ended now stay complete until their restart
            torch.logical_and(extended.finished, ~restarted, out=self._state[3])
        observed = self._observe()
        return (rewards, terminated, ended_queries, *summary.values(), *observed.values())

    def _observe(self) -> dict[str, torch.Tensor]:
        """:meth:`DeviceRoundBatch.observe` of the state, writing the mask into this step's mask (new tensors)."""
        rounds = self.rounds
        problem, state = rounds.problem, rounds.state
        table_rows = rounds.tables.masks.rows(state.lengths, state.finished)  # (N,)
        torch.index_select(rounds._mask_table, 0, table_rows, out=self._mask)
        embeddings = None
        if self.has_embeddings:
            assert isinstance(problem, LinearTokenizedProblem)
            embeddings = problem.observed_candidate_embeddings(state)  # (N, n, d) float32
            if not self.same_step:  # SAME_STEP leaves no row complete
                embeddings.masked_fill_(state.finished[:, None, None], 0.0)
        mask = torch.index_select(rounds._mask_table_int8, 0, table_rows)  # (N, n)
        return rows_observation(
            problem, state, rounds._candidate_tokens, action_mask=mask, candidate_embeddings=embeddings
        )

    def final_observations(
        self, rows: torch.Tensor, ended_queries: torch.Tensor, summary: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """``SAME_STEP``'s final observation of the rows ``rows`` ``(R,)`` whose round ended: ``(R, ...)`` each.

        What the eager step observes before the restart, on a complete response: its query, the response and
        length the summary holds, the complete response's mask row and zero candidate embeddings.
        """
        rounds = self.rounds
        problem = rounds.problem
        queries = ended_queries[rows]  # (R,)
        complete = torch.full_like(rows, problem.max_length + 1)  # (R,) the mask table's complete-response row
        embeddings = None
        if self.has_embeddings:
            assert isinstance(problem, LinearTokenizedProblem)
            shape = (rows.shape[0], self._mask.shape[1], problem.embedding_dim)  # (R, n, d)
            embeddings = torch.zeros(shape, dtype=torch.float32, device=rows.device)
        return observation(
            query=problem.query_tokens[queries],  # (R, Lq)
            query_length=problem.query_lengths[queries],  # (R,)
            response=summary["response"][rows],  # (R, L)
            length=summary["response_length"][rows],  # (R,)
            candidate_tokens=rounds._candidate_tokens[: rows.shape[0]].clone(),  # (R, n)
            action_mask=torch.index_select(rounds._mask_table_int8, 0, complete),  # (R, n)
            candidate_embeddings=embeddings,  # (R, n, d) float32 or None
        )


class CapturedVectorEnvStep:
    """:class:`StaticVectorEnvStep` in a :class:`CapturedStep`, fed the round buffer's next rounds.

    Args:
        rounds: the vector env's batch.
        round_buffer: the vector env's round buffer (its next rounds are the step's inputs).
        autoreset_mode: the vector env's.

    Attributes:
        static: the step.
        captured: whether a step replays a CUDA graph (False off CUDA, or where capture failed: said once).
    """

    def __init__(self, rounds: DeviceRoundBatch, round_buffer: RoundBuffer, autoreset_mode: AutoresetMode) -> None:
        self.static = StaticVectorEnvStep(rounds, autoreset_mode)
        self.round_buffer = round_buffer
        rows, device = rounds.num_rows, rounds.noise.device
        examples = [
            torch.zeros(rows, dtype=torch.int64, device=device),
            torch.zeros(rows, dtype=torch.bool, device=device),
            torch.zeros(rows, dtype=torch.int64, device=device),
            torch.zeros(rows, dtype=torch.float64, device=device),
        ]
        self._step = CapturedStep(self.static.env_step, examples, self.static.buffers())
        self.captured = self._step.captured

    def adopt(self) -> None:
        """:meth:`StaticVectorEnvStep.adopt`: after the env restarted rounds eagerly (``reset``)."""
        self.static.adopt()

    def __call__(
        self, tokens: torch.Tensor, restarting: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """One step; the round buffer advances on the rows that restarted.

        Returns:
            ``rewards``, ``terminated``, the queries the step's rounds were on (``(N,)`` each), the round
            summary and the next observation (new tensors).
        """
        static = self.static
        outputs = self._step(tokens, restarting, *self.round_buffer.next_rounds())
        assert isinstance(outputs, tuple)
        rewards, terminated, ended_queries = outputs[:3]
        summary_end = 3 + len(static.summary_keys)
        summary = dict(zip(static.summary_keys, outputs[3:summary_end], strict=True))
        observed = dict(zip(static.observation_keys, outputs[summary_end:], strict=True))
        self.round_buffer.advance(terminated if static.same_step else restarting)
        return rewards, terminated, ended_queries, summary, observed
