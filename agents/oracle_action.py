"""The action that continues a known response: what oracle baselines play, and their shared shell."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from tokenized_bandit_gym.agents.candidates import candidate_index
from tokenized_bandit_gym.core.tokenized_problem import TokenizedBanditProblem
from tokenized_bandit_gym.task import Task


def oracle_action(
    problem: TokenizedBanditProblem[Any] | None,
    benchmark: str,
    observation: dict[str, Any],
    info: dict[str, Any],
) -> int:
    """The candidate holding the next token of ``problem.<benchmark>(x_t).responses[0]``.

    Args:
        problem: the instance (None before the agent was reset).
        benchmark: ``"optimal"`` or ``"oracle_greedy"``, the problem's method (cached per query).
        observation: the env's observation (``length``, ``candidate_tokens``).
        info: the env's info (``query_index``).

    Raises:
        ValueError: the agent was not reset.
    """
    if problem is None:
        raise ValueError("an oracle agent's act() was called before reset(task)")
    query = torch.tensor([int(info["query_index"])], device=problem.device)
    response = getattr(problem, benchmark)(query).responses[0]  # (L,)
    return candidate_index(observation, int(response[int(observation["length"])]))


class OracleAgent:
    """An oracle baseline: keeps the instance at reset and plays ``problem.<benchmark>(x_t)`` token by token.

    It reads the hidden instance (``task.problem``) and the round's query index (``info["query_index"]``);
    a subclass names the problem's method in ``benchmark``.
    """

    benchmark: ClassVar[str]
    """``"optimal"`` or ``"oracle_greedy"``: the decode that is played (see :func:`oracle_action`)."""

    def __init__(self) -> None:
        self._problem: TokenizedBanditProblem[Any] | None = None

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Keep the instance."""
        self._problem = task.problem

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The candidate holding the benchmark response's next token."""
        return oracle_action(self._problem, self.benchmark, observation, info)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
