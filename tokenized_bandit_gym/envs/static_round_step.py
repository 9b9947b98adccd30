"""The torch backend's step of N synthetic rounds with static shapes: traceable whole, capturable as a CUDA graph.

:class:`StaticRoundStep` runs what the native vector env's torch backend does in a step with ``SAME_STEP``
autoreset, on a :class:`~tokenized_bandit_gym.envs.round_batch.DeviceRoundBatch`: the forced-EOS rule, the
append, the rewards of the rounds that end, their restart on the next queries and noises given, and the next
observation's mask and candidate embeddings. Its state lives in tensors it overwrites in place, and nothing is
read back to the host, so the whole step can be traced by ``torch.compile(..., fullgraph=True)`` and captured
once as a CUDA graph (:class:`~tokenized_bandit_gym.core.cuda_graph_step.CapturedStep`). The dynamics are the
core's own calls (``extend``, ``utility_of_complete``, ``initial_carry``, ``observed_candidate_embeddings``), so
its numbers are the vector env's (the tests hold them equal bit for bit); it computes only what it returns (no
info entries, no observation keys it does not hand out) and writes the restarted state straight into its
tensors. Checking the actions (range, refused masked actions) reads them back and is the caller's, as drawing
the next queries and noises is.
"""

from __future__ import annotations

import dataclasses

import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.envs.round_batch import DeviceRoundBatch


class StaticRoundStep:
    """N rounds of a :class:`DeviceRoundBatch` stepped in place (:meth:`step`).

    Every row steps (``SAME_STEP``) and every row whose round ends restarts in the same step, so after a step no
    row is finished: the next mask is the mask table's row of each row's length, and no candidate embedding needs
    zeroing.

    Args:
        rounds: the batch; its state, noise and mask are moved into tensors this step owns and overwrites.
    """

    def __init__(self, rounds: DeviceRoundBatch) -> None:
        self.rounds = rounds
        problem = rounds.problem
        self._state = [value.clone() for value in _fields(rounds.state)]
        self._noise, self._mask = rounds.noise.clone(), rounds.mask.clone()
        device = self._noise.device
        # 0-dim tensors, made once: a scalar cannot be the value of torch.where(..., out=) and a capture reads none
        self._eos = torch.tensor(problem.eos_token_id, device=device)
        self._zero_length = torch.tensor(0, device=device)
        self.rounds.state = DecodingState(*self._state)
        self.rounds.noise, self.rounds.mask = self._noise, self._mask

    def buffers(self) -> list[torch.Tensor]:
        """Every tensor :meth:`step` writes (to save and restore around warm-up runs)."""
        return [*self._state, self._noise, self._mask]

    def step(
        self, tokens: torch.Tensor, next_queries: torch.Tensor, next_noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step every row on ``tokens`` ``(N,)``; the rounds that end restart on ``next_queries``, ``next_noise``.

        Returns:
            ``rewards`` ``(N,)`` float64 (utility plus noise where a round ended, else 0), ``terminated`` ``(N,)``
            bool, the next ``action_mask`` ``(N, n)`` int8 and ``candidate_embeddings`` ``(N, n, d)`` float32 (a
            ``(N, n, 0)`` tensor where the instance has none).
        """
        rounds = self.rounds
        problem, state = rounds.problem, rounds.state
        num_actions = self._mask.shape[1]
        allowed = self._mask.gather(1, tokens.clamp(0, num_actions - 1)[:, None])[:, 0]  # (N,)
        chosen = torch.where(allowed, tokens, self._eos)  # (N,) the forced EOS: a masked action becomes EOS
        in_range = dataclasses.replace(state, lengths=state.lengths.clamp(max=problem.max_length - 1))
        extended = problem.extend(in_range, chosen)  # DeviceRoundBatch.advance
        terminated = extended.finished  # (N,) a new tensor
        utility = problem.utility_of_complete(extended).to(torch.float64)  # (N,) complete on the rows that matter
        rewards = torch.where(terminated, utility + self._noise, 0.0)  # (N,)
        self._restart(extended, terminated, next_queries, next_noise)
        lengths = state.lengths  # (N,) no row is finished now: the mask table's row is the length
        torch.index_select(rounds._mask_table, 0, lengths, out=self._mask)
        action_mask = torch.index_select(rounds._mask_table_int8, 0, lengths)  # (N, n)
        if isinstance(problem, LinearTokenizedProblem):
            embeddings = problem.observed_candidate_embeddings(state)  # (N, n, d) float32
        else:
            embeddings = torch.zeros(*self._mask.shape, 0, device=self._mask.device)
        return rewards, terminated, action_mask, embeddings

    def _restart(
        self, extended: DecodingState, ended: torch.Tensor, next_queries: torch.Tensor, next_noise: torch.Tensor
    ) -> None:
        """:meth:`DeviceRoundBatch.restart` of ``extended`` on the rows ``ended``, written into this step's tensors.

        Every finished row is in ``ended`` (every row stepped), so no row stays finished.
        """
        problem = self.rounds.problem
        queries, tokens, lengths, finished, carry, last_tokens = self._state
        carry_rows = ended.view(-1, *([1] * (carry.dim() - 1)))
        torch.where(ended, next_queries, queries, out=queries)
        torch.where(ended[:, None], self._eos, extended.tokens, out=tokens)
        torch.where(ended, self._zero_length, extended.lengths, out=lengths)
        finished.zero_()
        torch.where(carry_rows, problem.initial_carry(next_queries), extended.carry, out=carry)
        torch.where(ended, problem.query_last_tokens[next_queries], extended.last_tokens, out=last_tokens)
        torch.where(ended, next_noise, self._noise, out=self._noise)


def _fields(state: DecodingState) -> list[torch.Tensor]:
    """The state's tensors in field order."""
    return [getattr(state, field.name) for field in dataclasses.fields(state)]
