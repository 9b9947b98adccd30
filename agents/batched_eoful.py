"""EOFUL for the batched-bandit setting: N rounds decoded at once, one update per batch of rounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.agents.eoful import EOFUL
from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence
from tokenized_bandit_gym.core.validation import check_batch_memory, check_int
from tokenized_bandit_gym.task import Task

# A buffered round holds the response's embedding (d,) and its reward: at least 4 bytes a number.
BUFFERED_BYTES_PER_DIMENSION = 4


class BatchedEOFUL:
    """EOFUL (paper Algorithm 1) as a :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent`.

    The math is :class:`tokenized_bandit_gym.agents.eoful.EOFUL`'s, unchanged: every token is the allowed candidate
    with the highest ``<theta_hat_t, e> + sqrt(beta_t) ||e||_{Sigma_t^-1}`` (eq. update-c),
    scored for all N sub-envs and k candidates at once by :meth:`EOFUL.select`, and the ridge
    estimate (eq. update-theta) is updated by :meth:`EOFUL.learn` with the response embeddings
    ``e(x_s, y_s)`` (``info["response_embedding"]``) and rewards of a batch of rounds (a block
    Sherman-Morrison update in :class:`tokenized_bandit_gym.agents.linear_confidence.LinearConfidence`).

    Batching: the confidence set stays fixed until ``batch_size`` rounds have ended since the
    last update; then all of them are learned at once. ``batch_size=1`` on a one-sub-env
    vector env is exactly sequential EOFUL. Rounds still in flight at an update continue with
    the new confidence set for their remaining tokens (the paper's analysis fixes ``C_t`` for
    a whole round; this variant never uses staler information than the batch requires).

    Args:
        batch_size: rounds per update, >= 1.
        **eoful_kwargs: :class:`tokenized_bandit_gym.agents.eoful.EOFUL`'s keywords (``beta``, ``lambda_``,
            ``delta``, ``sigma``, ``refactor_every``, ``device``).
    """

    name = "batched_eoful"

    def __init__(self, batch_size: int = 1, **eoful_kwargs: Any) -> None:
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        check_batch_memory(self.batch_size, BUFFERED_BYTES_PER_DIMENSION * 2)  # d >= 1; reset() checks with d
        self.eoful = EOFUL(**eoful_kwargs)
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._pending_rounds = 0

    @property
    def confidence(self) -> LinearConfidence:
        """The confidence set (raises before :meth:`reset`)."""
        if self.eoful.confidence is None:
            raise ValueError("BatchedEOFUL used before reset(task, num_envs)")
        return self.eoful.confidence

    def reset(self, task: Task, num_envs: int, seed: int | None = None) -> None:
        """Start from ``Sigma_1 = lambda I``, ``theta_hat_1 = 0``, ``C_1 = {0}``."""
        check_int("num_envs", num_envs, minimum=1)
        self.eoful.reset(task, seed)
        check_batch_memory(self.batch_size, BUFFERED_BYTES_PER_DIMENSION * (self.confidence.dim + 1))
        self._pending, self._pending_rounds = [], 0

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> Any:
        """The optimistic greedy token of every sub-env, ``(N,)`` (array or tensor, as observed)."""
        confidence = self.confidence
        embeddings = confidence.as_tensor(observations["candidate_embeddings"])  # (N, k, d)
        mask = observations["action_mask"]
        actions = self.eoful.select(embeddings, mask if isinstance(mask, torch.Tensor) else np.asarray(mask))  # (N,)
        if isinstance(mask, torch.Tensor):
            return actions.to(mask.device)
        return actions.cpu().numpy()

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        """Buffer the ended rounds; once ``batch_size`` are buffered, learn from all of them."""
        confidence = self.confidence
        embeddings = confidence.as_tensor(infos["response_embedding"])  # (M, d)
        self._pending.append((embeddings, confidence.as_tensor(rewards)))  # (M, d), (M,)
        self._pending_rounds += int(embeddings.shape[0])
        if self._pending_rounds >= self.batch_size:
            self.eoful.learn(torch.cat([y for y, _ in self._pending]), torch.cat([r for _, r in self._pending]))
            self._pending, self._pending_rounds = [], 0
