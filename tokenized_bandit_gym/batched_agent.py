"""The protocol of agents that play N rounds at once on a vector env (the batched-bandit setting)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tokenized_bandit_gym.task import Task

if TYPE_CHECKING:
    import numpy as np
    import torch


@runtime_checkable
class BatchedAgent(Protocol):
    """An online learner that decodes N rounds in parallel and learns from batches of rounds.

    :func:`~tokenized_bandit_gym.evaluation.run_online_vector.run_online_vector` drives it on a
    vector env with NEXT_STEP autoreset, in this order:

    1. ``reset(task, num_envs, seed)`` once. ``task.horizon`` is the total number of rounds T
       the run will record, over all sub-envs together.
    2. Every vector step: ``actions = act_batch(observations, infos, needs_action)``. Rows of
       ``observations`` (a dict of arrays with a leading axis of N, the vector env's
       observation) are the sub-envs; ``infos`` is the vector env's info dict (arrays with
       ``_key`` masks; ``query_index`` is always valid); ``needs_action`` ``(N,)`` bool is
       False on the rows whose round ended in the previous step (the env starts a new round
       there and ignores the action). Returns ``(N,)`` integer actions of ``Discrete(k)``,
       valid (in range) on every row and allowed by ``observations["action_mask"]`` on the
       rows that need one.
    3. After a step in which M >= 1 rounds ended: ``update_batch(rows, observations, rewards,
       infos)`` once, with ``rows`` ``(M,)`` the sub-envs whose round ended, in increasing
       order, and everything restricted to those rows: ``observations`` the final
       observations (each key ``(M, ...)``), ``rewards`` ``(M,)`` the noisy rewards, ``infos``
       the round summaries (``utility``, ``regret``, ``response`` ``(M, L)`` padded with EOS,
       ``response_embedding`` ``(M, d)`` for TLB, ``query_index``, ``noise``, ...; no masks).
       Agents that read ``regret``, ``utility`` or the instance are oracles and must say so.

    Everything between two ``update_batch`` calls is decoded with the same parameters, so a
    learner that updates once per call is the batched bandit of the paper's setting with a
    batch of the rounds that end together; a learner may also buffer rounds and update every
    B rounds. Arrays are NumPy arrays or torch tensors, as the vector env's ``array_backend``
    returns them (``rows`` likewise).
    """

    name: str

    def reset(self, task: Task, num_envs: int, seed: int | None = None) -> None:
        """Forget everything and prepare to play ``task`` on ``num_envs`` sub-envs."""
        ...

    def act_batch(
        self,
        observations: dict[str, np.ndarray] | dict[str, torch.Tensor],
        infos: dict[str, Any],
        needs_action: np.ndarray | torch.Tensor,
    ) -> np.ndarray | torch.Tensor:
        """Return ``(N,)`` integer actions, one per sub-env."""
        ...

    def update_batch(
        self,
        rows: np.ndarray | torch.Tensor,
        observations: dict[str, np.ndarray] | dict[str, torch.Tensor],
        rewards: np.ndarray | torch.Tensor,
        infos: dict[str, Any],
    ) -> None:
        """Learn from the M rounds that ended in the last step (sub-envs ``rows``)."""
        ...
