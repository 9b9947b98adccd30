"""What a round starts from, per query: computed once, reused by every round on that query."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_int

# Most tensor elements the memo holds (queries are dropped first in, first out beyond it).
MEMO_ELEMENT_BUDGET = 1 << 22


@dataclass(frozen=True)
class QueryStart:
    """The empty response to one query and its candidates (batch of one, nothing depends on actions).

    Every tensor is shared by all rounds on the query: read it, never write into it (the core
    never does; it builds new tensors at every step).

    Attributes:
        state: ``B = 1`` :meth:`TokenizedProblem.initial_state` of the query.
        candidate_carries: ``(1, n, *c)`` :meth:`TokenizedProblem.candidate_carries` of
            ``state``, or None when the memo was built without candidates.
        candidate_embeddings: ``(n, d)`` float32 ``e(x, tau)`` of every one-token response, or
            None (no candidates, or a family without features).
    """

    state: DecodingState
    candidate_carries: torch.Tensor | None
    candidate_embeddings: torch.Tensor | None


class QueryStartMemo:
    """A batch-of-one env's round starts, computed by the core on first use of each query.

    Args:
        problem: the instance.
        with_candidates: also memoise the candidates' carries (and embeddings, for TLB
            families), for envs whose first observation needs them.
    """

    def __init__(self, problem: TokenizedProblem, with_candidates: bool) -> None:
        self.problem = problem
        self.with_candidates = with_candidates
        carry_numel = problem.initial_state(torch.zeros(1, dtype=torch.int64, device=problem.device)).carry.numel()
        per_query = problem.max_length + 4 + carry_numel
        if with_candidates:
            per_query += problem.vocab_size * (carry_numel + (problem.embedding_dim or 0))
        self.capacity = max(1, MEMO_ELEMENT_BUDGET // per_query)
        self._starts: dict[int, QueryStart] = {}

    def __len__(self) -> int:
        """Number of queries memoised now."""
        return len(self._starts)

    def get(self, query: int) -> QueryStart:
        """The round start of ``query`` (an index into the pool)."""
        start = self._starts.get(query)
        if start is None:
            start = self.compute(query)
            if len(self._starts) >= self.capacity:
                del self._starts[next(iter(self._starts))]
            self._starts[query] = start
        return start

    def compute(self, query: int) -> QueryStart:
        """The round start of ``query``, computed afresh by the core (no memo)."""
        check_int("query", query, minimum=0)
        if query >= self.problem.num_queries:
            raise ValueError(f"query must lie in [0, {self.problem.num_queries}), got {query}")
        problem = self.problem
        state = problem.initial_state(torch.full((1,), query, dtype=torch.int64, device=problem.device))
        if not self.with_candidates:
            return QueryStart(state, None, None)
        carries = problem.candidate_carries(state)  # (1, n, *c)
        embeddings = None
        if isinstance(problem, LinearTokenizedProblem):
            embeddings = problem.candidate_embeddings(state, carries)[0].to(torch.float32, copy=True)  # (n, d)
        return QueryStart(state, carries, embeddings)
