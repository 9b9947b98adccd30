"""The small protocol every agent implements (DESIGN.md section 4)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tokenized_bandit_gym.task import Task


@runtime_checkable
class Agent(Protocol):
    """An online learner for token tasks: one round = one episode.

    The run loop calls :meth:`reset` once, then in every round :meth:`act` for each token
    until the response is complete, then :meth:`update` once with the round's reward. Agents
    keep their own state; they never see the hidden instance unless they are oracle
    baselines (which say so in their docstring).
    """

    name: str

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Forget everything and prepare to play ``task`` for ``task.horizon`` rounds."""
        ...

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """Return the index of the next candidate (an action of ``Discrete(k)``)."""
        ...

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Learn from the round just finished: its last observation, reward and info."""
        ...
