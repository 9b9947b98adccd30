"""Greedy decoding with a fixed (wrong) parameter: the paper's "WrongTheta" baseline."""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.agents.linear_confidence import masked_argmax
from tokenized_bandit_gym.task import Task


class FixedThetaGreedy:
    """At each position, the allowed candidate maximising ``<theta', e(x, y:tau)>`` for a fixed theta'.

    The paper's WrongTheta (section 6.2) uses ``theta' = (-0.5, ..., -0.5)``, the default here.
    It never learns. Ties go to the lowest index.

    Args:
        theta: a scalar (theta' is that value in every coordinate) or a ``(d,)`` vector.
    """

    name = "fixed_theta_greedy"

    def __init__(self, theta: float | np.ndarray | torch.Tensor | list[float] = -0.5) -> None:
        if isinstance(theta, bool):
            raise TypeError(f"theta must be a number or a vector, got {theta!r}")
        if isinstance(theta, Real):
            self._fill: float | None = float(theta)
            self._vector: torch.Tensor | None = None
        else:
            vector = torch.as_tensor(np.asarray(theta, dtype=np.float64))
            if vector.dim() != 1 or not torch.isfinite(vector).all():
                raise ValueError(f"theta must be a finite scalar or 1-d vector, got {theta!r}")
            self._fill, self._vector = None, vector
        if self._fill is not None and not np.isfinite(self._fill):
            raise ValueError(f"theta must be finite, got {theta!r}")
        self.theta: torch.Tensor | None = None

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Build theta' for the task's embedding dimension."""
        if task.embedding_dim is None:
            raise ValueError(f"FixedThetaGreedy needs candidate embeddings; task {task.env_id!r} has none")
        if self._vector is None:
            self.theta = torch.full((task.embedding_dim,), self._fill, dtype=torch.float64)  # (d,)
        elif self._vector.shape[0] != task.embedding_dim:
            raise ValueError(f"theta has {self._vector.shape[0]} entries but the task has d = {task.embedding_dim}")
        else:
            self.theta = self._vector.clone()  # (d,)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The allowed candidate with the highest ``<theta', e>``."""
        if self.theta is None:
            raise ValueError("FixedThetaGreedy.act() called before reset(task)")
        embeddings = torch.as_tensor(observation["candidate_embeddings"]).to(torch.float64)  # (k, d)
        mask = torch.as_tensor(np.asarray(observation["action_mask"])).bool()  # (k,)
        scores = embeddings @ self.theta  # (k,)
        return int(masked_argmax(scores, mask))

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
