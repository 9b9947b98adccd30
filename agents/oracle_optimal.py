"""Plays the exact optimum of every round (oracle): regret exactly 0, a sanity check."""

from __future__ import annotations

from typing import Any

from tokenized_bandit_gym.agents.oracle_action import oracle_action
from tokenized_bandit_gym.core.tokenized_problem import TokenizedBanditProblem
from tokenized_bandit_gym.task import Task


class OracleOptimal:
    """Emits the exact optimal response ``problem.optimal(x_t)`` token by token.

    Oracle baseline: it reads the hidden instance (``task.problem``) and the round's query
    index (``info["query_index"]``). Its regret is exactly 0 on every synthetic env, where the
    optimum is exact (dynamic program or enumeration); anything else is a bug in the env or the
    run loop.
    """

    name = "oracle_optimal"

    def __init__(self) -> None:
        self._problem: TokenizedBanditProblem[Any] | None = None

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Keep the instance."""
        self._problem = task.problem

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The candidate holding the optimal response's next token."""
        return oracle_action(self._problem, "optimal", observation, info)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
