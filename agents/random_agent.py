"""Uniformly random decoding: the baseline every learner must beat."""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenized_bandit_gym.task import Task


class RandomAgent:
    """Picks an allowed candidate uniformly at random at every position (never learns)."""

    name = "random"
    feedback_channels = ("scalar", "pairwise")  # it does not learn: any channel

    def __init__(self) -> None:
        self._rng = np.random.default_rng()

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Reseed the agent's own generator."""
        self._rng = np.random.default_rng(seed)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """A uniformly random allowed action."""
        allowed = np.flatnonzero(observation["action_mask"])
        return int(self._rng.choice(allowed))

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
