"""Greedy decoding with the true utility: the paper's "Optimal greedy" benchmark (oracle)."""

from __future__ import annotations

from typing import Any

from tokenized_bandit_gym.agents.oracle_action import oracle_action
from tokenized_bandit_gym.core.tokenized_problem import TokenizedBanditProblem
from tokenized_bandit_gym.task import Task


class OracleGreedy:
    """At each position, the allowed candidate with the highest true ``u(x, y:tau)``.

    Oracle baseline: it reads the hidden instance (``task.problem``) and the round's query index
    (``info["query_index"]``), and emits ``problem.oracle_greedy(x_t)`` token by token: the greedy
    decode the env itself uses as the ``oracle_greedy_utility`` benchmark (ties to the lowest
    candidate), computed once per query. Its regret against the exact optimum is the greedy gap,
    the floor under any greedy-based agent (zero on exact-DDMC families with
    ``fixed_length=True``, Theorem 5.1).
    """

    name = "oracle_greedy"
    feedback_channels = ("scalar", "pairwise")  # it does not learn: any channel

    def __init__(self) -> None:
        self._problem: TokenizedBanditProblem[Any] | None = None

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Keep the instance."""
        self._problem = task.problem

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The candidate holding the greedy response's next token."""
        return oracle_action(self._problem, "oracle_greedy", observation, info)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
