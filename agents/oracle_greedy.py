"""Greedy decoding with the true utility: the paper's "Optimal greedy" benchmark (oracle)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.task import Task


class OracleGreedy:
    """At each position, the allowed candidate with the highest true ``u(x, y:tau)``.

    Oracle baseline: it reads the hidden instance (``task.problem``). Its regret against the
    exact optimum is the greedy gap, the floor under any greedy-based agent (zero on
    exact-DDMC families with ``fixed_length=True``, Theorem 5.1). Ties go to the lowest id.
    """

    name = "oracle_greedy"

    def __init__(self) -> None:
        self._problem: TokenizedProblem | None = None

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Keep the instance."""
        self._problem = task.problem

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The allowed token with the highest true utility after it."""
        if self._problem is None:
            raise ValueError("OracleGreedy.act() called before reset(task)")
        problem = self._problem
        length = int(observation["length"])
        query = torch.tensor([int(info["query_index"])], device=problem.device)
        response = torch.as_tensor(np.asarray(observation["response"])[None, :length], device=problem.device)
        state = problem.state_for(query, response)
        scores = problem.candidate_utilities(state)[0]  # (n,)
        scores = scores.masked_fill(~problem.action_mask(state)[0], float("-inf"))
        return int(scores.argmax())

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
