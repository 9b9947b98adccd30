"""The small protocol every agent implements (docs/AGENTS.md; docs/ARCHITECTURE.md, "How to add an agent")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tokenized_bandit_gym.task import Task

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class Agent(Protocol):
    """An online learner for token tasks: one round = one episode.

    The run loop calls :meth:`reset` once, then in every round :meth:`act` for each token
    until the response is complete, then :meth:`update` once with the round's reward. Agents
    keep their own state; they never see the hidden instance unless they are oracle
    baselines (which say so in their docstring).
    """

    name: str
    """The agent's registered name. An agent may also declare ``feedback_channels`` (a tuple of
    ``"scalar"`` / ``"pairwise"``): the feedback it learns from, ``("scalar",)`` when absent."""

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Forget everything and prepare to play ``task`` for ``task.horizon`` rounds."""
        ...

    def act(self, observation: dict[str, np.ndarray | np.int64], info: dict[str, Any]) -> int:
        """Return the index of the next candidate (an action of ``Discrete(k)``).

        ``observation`` is the single env's: arrays keyed as its ``Dict`` space (``length`` and
        ``query_length`` as ``np.int64``); ``info`` its info dict (the env contract's entries).
        """
        ...

    def update(self, observation: dict[str, np.ndarray | np.int64], reward: float, info: dict[str, Any]) -> None:
        """Learn from the round just finished: its last observation, reward and info."""
        ...


SCALAR_FEEDBACK = ("scalar",)
"""What an agent that declares no ``feedback_channels`` learns from: the scalar reward."""


def check_feedback(agent: object, task: Task) -> None:
    """Refuse to play ``task`` with an agent that cannot learn from its feedback channel.

    The run loops call it before ``agent.reset``; an agent names what it learns from in its
    ``feedback_channels`` attribute (``("scalar",)`` when absent, so every scalar agent is refused
    a pairwise env: its update would read a preference bit as a utility).

    Raises:
        ValueError: ``task.feedback`` is not among the agent's ``feedback_channels``, naming both.
    """
    channels = tuple(getattr(agent, "feedback_channels", SCALAR_FEEDBACK))
    if task.feedback not in channels:
        name = getattr(agent, "name", type(agent).__name__)
        raise ValueError(
            f"agent {name!r} learns from {' or '.join(channels)} feedback, but the env gives "
            f"feedback={task.feedback!r}: use an agent for it (pairwise: 'dueling_eoful', 'tpop', 'random', "
            "'oracle_greedy') or make the env with the agent's feedback"
        )
