"""The exact round benchmarks of every query in the pool, copied to the host once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem


@dataclass(frozen=True)
class PoolBenchmarks:
    """What a round's info reports besides the agent's own response, per query, on the host.

    They depend on the query alone, so a batch-of-one env reads them here instead of indexing
    the problem's device tensors (and syncing) at every round end. The values are the
    problem's own (:meth:`TokenizedProblem.optimal` and :meth:`TokenizedProblem.oracle_greedy`
    on the whole pool), copied element for element.

    Attributes:
        optimal_utility: ``(Q,)`` u of the exact optimal response of each query (the
            problem's dtype).
        optimal_responses: ``(Q, L)`` int64 the exact optimal responses, padded with EOS.
        oracle_greedy_utility: ``(Q,)`` u of greedy decoding with the true utility.
    """

    optimal_utility: np.ndarray
    optimal_responses: np.ndarray
    oracle_greedy_utility: np.ndarray

    @classmethod
    def from_problem(cls, problem: TokenizedProblem) -> PoolBenchmarks:
        """Compute (or read the problem's cached) benchmarks of every query and copy them."""
        pool = torch.arange(problem.num_queries, device=problem.device)  # (Q,)
        optimum = problem.optimal(pool)
        greedy = problem.oracle_greedy(pool)
        arrays = [optimum.utility, optimum.responses, greedy.utility]
        optimal_utility, optimal_responses, greedy_utility = (tensor.cpu().numpy().copy() for tensor in arrays)
        for array in (optimal_utility, optimal_responses, greedy_utility):
            array.flags.writeable = False
        return cls(optimal_utility, optimal_responses, greedy_utility)
