"""GreedyETC for the batched-bandit setting: N rounds decoded at once, one update per batch of rounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.agents.greedy_etc import GreedyETC
from tokenized_bandit_gym.core.validation import check_batch_memory, check_int
from tokenized_bandit_gym.host_array import as_host_array
from tokenized_bandit_gym.task import Task

# A buffered round holds its level and arm (int64) and its reward (float64).
BUFFERED_BYTES_PER_ROUND = 24


class BatchedGreedyETC:
    """GreedyETC (paper Algorithm 2) as a :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent`.

    The math is :class:`tokenized_bandit_gym.agents.greedy_etc.GreedyETC`'s (one instance holds ``y``, the level's
    tokens and ``r_bar``; :meth:`GreedyETC.credit` and :meth:`GreedyETC.commit` are shared).
    Every round follows the committed prefix ``y``; a round that reaches position ``|y|``
    before the agent has committed explores one of the level's tokens ``t`` and ends with
    ``y:t:EOS`` (``y:t:c...c:EOS`` with a ``completion_token``), exactly as the sequential
    agent submits.

    Which token a round explores is fixed when it reaches ``|y|``: the first token (candidate
    order) with fewer than N submissions planned (credited, waiting in the batch or in flight),
    which is the sequential agent's order; once every token has N planned, the round explores
    the token with the fewest planned (ties: first), so parallel rounds still gather data.

    Batching: the statistics stay fixed until ``batch_size`` rounds have ended since the last
    update; then their rewards are credited at once, and the agent commits when every token of
    the level has at least N rewards (rewards of an older level are dropped). ``batch_size=1``
    on a one-sub-env vector env is exactly sequential GreedyETC. The cost of batching is the
    extra exploration: up to ``batch_size - 1`` rounds per level that explore past N while the
    agent waits for its update, plus the rounds in flight at each commit.

    Observations are read on the host (a tabular agent); actions come back as the mask's type
    (NumPy array, or tensor on its device).

    Args:
        batch_size: rounds per update, >= 1.
        **etc_kwargs: :class:`tokenized_bandit_gym.agents.greedy_etc.GreedyETC`'s keywords (``exploration_rounds``,
            ``completion_token``).
    """

    name = "batched_greedy_etc"

    def __init__(self, batch_size: int = 1, **etc_kwargs: Any) -> None:
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        check_batch_memory(self.batch_size, BUFFERED_BYTES_PER_ROUND)
        self.etc = GreedyETC(**etc_kwargs)
        self._task: Task | None = None
        self._row_arm = np.zeros(0, dtype=np.int64)  # (N,) token index explored by the row's round, -1 none
        self._row_level = np.zeros(0, dtype=np.int64)  # (N,) |y| when that token was chosen
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (levels, arms, rewards) per call
        self._pending_rounds = 0

    def reset(self, task: Task, num_envs: int, seed: int | None = None) -> None:
        """Start over with ``y = ()`` (raises like :meth:`GreedyETC.reset`)."""
        num_envs = check_int("num_envs", num_envs, minimum=1)
        self.etc.reset(task, seed)
        self._task = task
        self._row_arm = np.full(num_envs, -1, dtype=np.int64)
        self._row_level = np.zeros(num_envs, dtype=np.int64)
        self._pending, self._pending_rounds = [], 0

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> Any:
        """The next token of every sub-env's submission, as candidate indices ``(N,)``.

        Raises:
            ValueError: before :meth:`reset`, or a planned token is not an allowed candidate.
        """
        task = self._require_task()
        etc = self.etc
        mask = observations["action_mask"]
        allowed = as_host_array(mask).astype(bool)  # (N, k)
        candidates = as_host_array(observations["candidate_tokens"])  # (N, k)
        lengths = as_host_array(observations["length"]).astype(np.int64)  # (N,)
        needs = as_host_array(needs_action).astype(bool)  # (N,)
        prefix = np.asarray(etc.prefix + [task.eos_token_id], dtype=np.int64)  # (|y| + 1,)
        level = len(etc.prefix)
        in_prefix = (self._row_arm < 0) & (lengths < level)  # (N,) rows following y
        exploring = needs & (self._row_arm < 0) & (lengths == level) & (not etc.committed)  # (N,)
        targets = np.where(in_prefix, prefix[np.minimum(lengths, level)], -1)  # (N,) token ids, -1: ends
        rows = np.flatnonzero(exploring)
        if rows.size:
            first = rows[0]
            level_tokens = np.asarray(
                etc.observe_level({"candidate_tokens": candidates[first], "action_mask": allowed[first]})
            )
            arms = self._next_arms(rows.size)
            self._row_arm[rows], self._row_level[rows] = arms, level
            targets[rows] = level_tokens[arms]
        ending = targets < 0  # (N,) after the explored token: EOS, or the completion token where EOS is not allowed
        eos_allowed = ((candidates == task.eos_token_id) & allowed).any(axis=1)  # (N,)
        if bool((ending & ~eos_allowed & needs).any()):
            targets = np.where(ending & ~eos_allowed, etc.completion(), targets)
        targets = np.where(ending & eos_allowed, task.eos_token_id, targets)
        matches = (candidates == targets[:, None]) & allowed  # (N, k)
        missing = needs & ~matches.any(axis=1)
        if bool(missing.any()):
            row = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"token {int(targets[row])} is not an allowed candidate of sub-env {row} at position "
                f"{int(lengths[row]) + 1}: allowed tokens are {candidates[row][allowed[row]].tolist()}"
            )
        actions = matches.argmax(axis=1)  # (N,) first match; 0 on rows that need no action
        if isinstance(mask, torch.Tensor):
            return torch.as_tensor(actions, device=mask.device)
        return actions

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        """Buffer the ended rounds; once ``batch_size`` are buffered, credit them and commit if the level is done."""
        self._require_task()
        rows = as_host_array(rows).astype(np.int64)  # (M,)
        arms, levels = self._row_arm[rows].copy(), self._row_level[rows].copy()
        self._row_arm[rows] = -1  # the next round of these rows starts afresh
        self._pending.append((levels, arms, as_host_array(rewards).astype(np.float64)))
        self._pending_rounds += int(rows.size)
        if self._pending_rounds < self.batch_size:
            return
        etc = self.etc
        for levels, arms, rewards in self._pending:
            for level, arm, reward in zip(levels.tolist(), arms.tolist(), rewards.tolist(), strict=True):
                if arm >= 0 and level == len(etc.prefix) and not etc.committed:
                    etc.credit(arm, reward)
        self._pending, self._pending_rounds = [], 0
        counts = etc.counts
        if not etc.committed and etc.level_tokens is not None and bool((counts >= etc.exploration_rounds).all()):
            etc.commit()

    @property
    def committed_response(self) -> tuple[int, ...] | None:
        """The committed response (ending with EOS) once exploration is over, else None."""
        return self.etc.committed_response

    def _next_arms(self, count: int) -> np.ndarray:
        """Tokens for ``count`` rounds reaching ``|y|`` now, in the sequential order, then the least planned."""
        etc = self.etc
        level = len(etc.prefix)
        planned = etc.counts.copy()  # (A,)
        for levels, pending_arms, _ in self._pending:
            np.add.at(planned, pending_arms[(levels == level) & (pending_arms >= 0)], 1)
        in_flight = (self._row_arm >= 0) & (self._row_level == level)
        np.add.at(planned, self._row_arm[in_flight], 1)
        remaining = np.maximum(etc.exploration_rounds - planned, 0)  # (A,)
        arms = list(np.repeat(np.arange(planned.size), remaining)[:count])
        planned = planned + np.bincount(np.asarray(arms, dtype=np.int64), minlength=planned.size)
        while len(arms) < count:  # every token has N planned: spread the extra rounds
            arm = int(np.argmin(planned))
            arms.append(arm)
            planned[arm] += 1
        return np.asarray(arms, dtype=np.int64)

    def _require_task(self) -> Task:
        if self._task is None:
            raise ValueError("BatchedGreedyETC used before reset(task, num_envs)")
        return self._task
