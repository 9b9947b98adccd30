"""The action that continues a known response: what oracle baselines play."""

from __future__ import annotations

from typing import Any

import torch

from tokenized_bandit_gym.agents.candidates import candidate_index
from tokenized_bandit_gym.core.tokenized_problem import TokenizedBanditProblem


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
