"""The torch backend's step of N synthetic rounds with static shapes: traceable whole, capturable as a CUDA graph.

:class:`StaticRoundStep` runs what the native vector env's torch backend does in a step with ``SAME_STEP``
autoreset, on a :class:`~tokenized_bandit_gym.envs.round_batch.DeviceRoundBatch`: the forced-EOS rule, the
append, the rewards of the rounds that end, their restart on the next queries and noises given, and the next
observation's mask and candidate embeddings. Its state lives in tensors it overwrites in place, and nothing is
read back to the host, so the whole step can be traced by ``torch.compile(..., fullgraph=True)`` and captured
once as a CUDA graph (:class:`~tokenized_bandit_gym.core.cuda_graph_step.CapturedStep`). It calls the batch's own
methods, so its numbers are the vector env's. Checking the actions (range, refused masked actions) reads them
back and is the caller's, as drawing the next queries and noises is.
"""

from __future__ import annotations

import dataclasses

import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.envs.env_contract import forced_and_refused
from tokenized_bandit_gym.envs.round_batch import DeviceRoundBatch


class StaticRoundStep:
    """N rounds of a :class:`DeviceRoundBatch` stepped in place (:meth:`step`).

    Args:
        rounds: the batch; its state, noise and mask are moved into tensors this step owns and overwrites.
    """

    def __init__(self, rounds: DeviceRoundBatch) -> None:
        self.rounds = rounds
        rounds._pool_benchmarks()  # built on first use (host work): built here, before any trace or capture
        self._state = [value.clone() for value in _fields(rounds.state)]
        self._noise, self._mask = rounds.noise.clone(), rounds.mask.clone()
        self._reattach()

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
        stepping = torch.ones_like(rounds.finished)  # SAME_STEP: every row steps (ended ones restarted already)
        allowed, _ = rounds.allowed(tokens)
        forced_eos, _ = forced_and_refused(allowed, rounds.lengths, stepping, rounds.problem.max_length, False)
        rounds.advance(rounds.forced_actions(tokens, forced_eos), stepping)
        terminated = rounds.finished.clone()  # (N,)
        summary = rounds.round_summary(terminated)
        rewards = torch.where(terminated, summary["utility"] + rounds.noise, 0.0)  # (N,)
        rounds.restart(terminated, next_queries, next_noise)
        observation = rounds.observe()
        embeddings = observation.get("candidate_embeddings")
        if embeddings is None:
            embeddings = torch.zeros(*rounds.mask.shape, 0, device=rounds.mask.device)
        for kept, value in zip(self.buffers(), [*_fields(rounds.state), rounds.noise, rounds.mask], strict=True):
            kept.copy_(value)
        self._reattach()
        return rewards, terminated, observation["action_mask"], embeddings

    def _reattach(self) -> None:
        """Point the batch at this step's tensors (the next step reads them where the last one wrote them)."""
        self.rounds.state = DecodingState(*self._state)
        self.rounds.noise, self.rounds.mask = self._noise, self._mask


def _fields(state: DecodingState) -> list[torch.Tensor]:
    """The state's tensors in field order."""
    return [getattr(state, field.name) for field in dataclasses.fields(state)]
