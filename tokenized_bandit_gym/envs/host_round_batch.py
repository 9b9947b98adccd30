"""The round batch on the host: B rounds of a synthetic instance with their bookkeeping in NumPy.

:class:`RoundBatch` is what a synthetic shell steps: restart, advance, observe and the round
summary of B rounds. Two host implementations share its tables (the action mask by length, the
query pool, the pool's benchmarks): :class:`HostRoundBatch`, B = N rows in NumPy (the vector
env's NumPy backend on the CPU), and :class:`SingleRoundBatch`, B = 1 (the single env), whose
rows are its one round's values without the row axis and whose step reads the per-query prefix
memo (:class:`~tokenized_bandit_gym.core.query_start_memo.QueryStartMemo`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.core.action_mask_table import ActionMaskTable
from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.pool_benchmarks import PoolBenchmarks
from tokenized_bandit_gym.core.query_start_memo import QueryStart, QueryStartMemo
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.envs.env_contract import observation, round_summary, to_numpy


class RoundBatch(ABC):
    """The bookkeeping of B rounds of one synthetic instance on the host (the dynamics are the core's).

    A shell draws the rounds, checks the actions (:mod:`~tokenized_bandit_gym.envs.env_contract`)
    and calls, per step: :meth:`advance`, :meth:`round_summary` on the rows whose round ended,
    :meth:`restart` on the rows that start a new one, :meth:`observe`. The tables every
    implementation reads are built here once: the action mask by length (:class:`ActionMaskTable`),
    the query pool as int64 arrays, the pool's benchmarks (:class:`PoolBenchmarks`, on first use).

    Args:
        problem: the instance (any device for B = 1, whose memo reads its values back to the host;
            the CPU for :class:`HostRoundBatch`).
        num_rows: B.

    Attributes:
        queries, lengths, finished, noise: each row's query index, tokens chosen so far, whether
            its response is complete and its reward noise (``(B,)`` arrays; scalars when B = 1).
        mask: the allowed actions now, ``(B, n)`` bool (``(n,)`` when B = 1; read, never write).
    """

    def __init__(self, problem: TokenizedProblem, num_rows: int) -> None:
        self.problem = problem
        self.num_rows = num_rows
        self._masks = ActionMaskTable(problem)
        self._query_tokens = to_numpy(problem.query_tokens).astype(np.int64)  # (Q, Lq)
        self._query_lengths = to_numpy(problem.query_lengths).astype(np.int64)  # (Q,)
        self._has_embeddings = isinstance(problem, LinearTokenizedProblem)
        self._pool_benchmarks: PoolBenchmarks | None = None

    def benchmarks(self) -> PoolBenchmarks:
        """Every query's exact optimum, oracle greedy utility and optimal response (built on first use)."""
        if self._pool_benchmarks is None:
            self._pool_benchmarks = PoolBenchmarks.from_problem(self.problem)
        return self._pool_benchmarks

    @abstractmethod
    def restart(self, rows: Any, queries: Any, noise: Any) -> None:
        """Start new rounds on ``rows`` (``(B,)`` bool), on ``queries`` with ``noise`` (read on ``rows``)."""

    @abstractmethod
    def advance(self, tokens: Any) -> None:
        """Append ``tokens`` (``(B,)`` int64, EOS already forced where the contract forces it)."""

    @abstractmethod
    def observe(self) -> dict[str, Any]:
        """The observation of every row (new arrays), keyed as the contract's; updates :attr:`mask`."""

    @abstractmethod
    def round_summary(self, ended: Any) -> dict[str, Any]:
        """The contract's round-end info entries of the rows ``ended`` (``(B,)`` bool)."""


class SingleRoundBatch(RoundBatch):
    """B = 1 on the host: one round, its rows without the row axis, stepped through the prefix memo.

    Per step only what depends on the action goes through torch, once per prefix: the mask is
    looked up, every prefix played (the round start included) and its candidates are memoised
    per query (:class:`QueryStartMemo`), the complete response's utility once per response.

    Args:
        problem: the instance (on the CPU).

    Attributes:
        queries: the round's query index (int).
        lengths: tokens chosen so far (int).
        finished: whether the response is complete (bool).
        noise: the round's reward noise (float).
        mask: ``(n,)`` bool the allowed actions now.
        memo: the per-query prefix memo.
        node: the memo's node of the current prefix (None before the first :meth:`restart`).
    """

    def __init__(self, problem: TokenizedProblem) -> None:
        super().__init__(problem, 1)
        n = problem.vocab_size
        self.memo = QueryStartMemo(problem, with_candidates=self._has_embeddings)
        self._token_tensors = [problem.vocabulary[token : token + 1] for token in range(n)]  # n x (1,)
        self._candidate_tokens = np.arange(n, dtype=np.int64)  # (n,)
        self._no_embeddings: np.ndarray | None = None
        if isinstance(problem, LinearTokenizedProblem):
            self._no_embeddings = np.zeros((n, problem.embedding_dim), dtype=np.float32)  # (n, d)
        self.node: QueryStart | None = None
        self.response = np.full(problem.max_length, problem.eos_token_id, dtype=np.int64)  # (L,) the tokens
        self.queries = 0
        self.lengths = 0
        self.finished = False
        self.noise = 0.0
        self.mask = self._masks.allowed[self._masks.row(0, finished=False)]  # (n,)

    def restart(self, rows: Any, queries: Any, noise: Any) -> None:
        """Start a new round (``rows`` is ignored: the one row) on query ``queries`` (int) with ``noise`` (float)."""
        self.queries, self.noise = queries, noise
        self.node = self.memo.get(queries)
        self.response.fill(self.problem.eos_token_id)
        self.lengths = 0
        self.finished = False

    def advance(self, tokens: Any) -> None:
        """Append the token ``tokens`` (int): a memo read when the prefix was played before."""
        eos = self.problem.eos_token_id
        self.node = self.memo.child(self.queries, self.node, tokens, self._token_tensors[tokens])
        self.response[self.lengths] = tokens
        self.lengths += 1
        self.finished = tokens == eos

    def observe(self) -> dict[str, Any]:
        """The round's observation (host copies throughout); updates :attr:`mask`."""
        masks, query, node = self._masks, self.queries, self.node
        row = masks.row(self.lengths, self.finished)
        self.mask = masks.allowed[row]
        embeddings = None
        if self._no_embeddings is not None:
            memoised = None if self.finished or node is None else node.host_embeddings
            embeddings = self._no_embeddings.copy() if memoised is None else memoised.copy()  # zeros once complete
        return observation(
            query=self._query_tokens[query].copy(),
            query_length=self._query_lengths[query].copy(),
            response=self.response.copy(),
            length=np.int64(self.lengths),
            candidate_tokens=self._candidate_tokens.copy(),
            action_mask=masks.allowed_int8[row].copy(),
            candidate_embeddings=embeddings,
        )

    def round_summary(self, ended: Any = True) -> dict[str, Any]:
        """The info entries of the round just completed (``ended`` is ignored: the one row).

        Raises:
            ValueError: before the first :meth:`restart`.
        """
        node = self.node
        if node is None:
            raise ValueError("the environment has no round yet: call reset() first")
        benchmarks, query = self.benchmarks(), self.queries
        if node.round_end is None:  # the complete response's utility and embedding, once per response
            embedding = None
            if self._has_embeddings:
                assert isinstance(self.problem, LinearTokenizedProblem)
                embedding = to_numpy(self.problem.embedding_of(node.state).to(torch.float32))[0].copy()  # (d,)
            node.round_end = (float(self.problem.utility_of_complete(node.state)), embedding)  # (1,) -> its value
        utility, embedding = node.round_end
        return round_summary(
            utility=utility,
            optimal_utility=float(benchmarks.optimal_utility[query]),
            oracle_greedy_utility=float(benchmarks.oracle_greedy_utility[query]),
            optimal_kind="exact",
            noise=self.noise,
            response=self.response.copy(),  # (L,) padded with EOS
            response_length=self.lengths,
            optimal_response=benchmarks.optimal_responses[query].copy(),
            response_embedding=None if embedding is None else embedding.copy(),
        )


class HostRoundBatch(RoundBatch):
    """The state of N rounds on the host, stepped with the core's own batched calls.

    The dynamics are the core's, as in the vector env's torch path: the chosen tokens' carries
    come from :meth:`TokenizedProblem.append`, the observed embeddings from
    :meth:`LinearTokenizedProblem.observed_candidate_embeddings`, the utilities from
    :meth:`TokenizedProblem.utility_of_complete`, each called once per step on the whole batch
    (torch on the CPU, reading the host arrays without copies). What is of size N or
    ``(N, L)`` (tokens, lengths, flags, the mask, the round-end entries) is NumPy, where an
    operation costs about a microsecond and a torch dispatch about ten: at small N that is
    most of a step. The mask and the round's benchmarks are read from the tables
    :class:`RoundBatch` builds (:class:`ActionMaskTable`, :class:`PoolBenchmarks`), the same the
    single env's :class:`SingleRoundBatch` reads.

    Every array the batch hands out is a new one (never a view of its state).

    Args:
        problem: the instance (on the CPU).
        num_rows: N.

    Attributes:
        queries: ``(N,)`` int64 query index of each round.
        tokens: ``(N, L)`` int64 the responses, padded with EOS.
        lengths: ``(N,)`` int64 tokens chosen so far.
        finished: ``(N,)`` bool whether each response is complete.
        last_tokens: ``(N,)`` int64 last token of ``x:y``.
        carry: ``(N, *c)`` the family's carries (a torch tensor on the CPU).
        noise: ``(N,)`` float64 the reward noise of each round.
        mask: ``(N, n)`` bool the allowed actions now.
    """

    def __init__(self, problem: TokenizedProblem, num_rows: int) -> None:
        if problem.device.type != "cpu":  # its arithmetic is NumPy's
            raise ValueError(f"{type(self).__name__} needs an instance on the CPU, got device {problem.device}")
        super().__init__(problem, num_rows)
        length = problem.max_length
        self._query_last_tokens = problem.query_last_tokens.numpy().astype(np.int64)  # (Q,)
        self._candidate_tokens = np.tile(np.arange(problem.vocab_size, dtype=np.int64), (num_rows, 1))  # (N, n)
        self._rows = np.arange(num_rows)  # (N,)
        self.queries = np.zeros(num_rows, dtype=np.int64)
        self.tokens = np.full((num_rows, length), problem.eos_token_id, dtype=np.int64)
        self.lengths = np.zeros(num_rows, dtype=np.int64)
        self.finished = np.zeros(num_rows, dtype=bool)
        self.last_tokens = np.zeros(num_rows, dtype=np.int64)
        self.carry = problem.initial_carry(torch.from_numpy(self.queries))
        self.noise = np.zeros(num_rows, dtype=np.float64)
        # (N, n, *c) every candidate's carry, written by observe() (TLB families); advance() reads the chosen one
        self._candidate_carries: np.ndarray | None = None
        self._candidates_current = False  # whether _candidate_carries belongs to the current state
        self.mask = self._masks.allowed[self._mask_rows()]

    def state(self) -> DecodingState:
        """The core's view of the batch (tensors sharing the host arrays; read, never write)."""
        return DecodingState(
            queries=torch.from_numpy(self.queries),
            tokens=torch.from_numpy(self.tokens),
            lengths=torch.from_numpy(self.lengths),
            finished=torch.from_numpy(self.finished),
            carry=self.carry,
            last_tokens=torch.from_numpy(self.last_tokens),
        )

    def restart(self, rows: np.ndarray, queries: np.ndarray, noise: np.ndarray) -> None:
        """Start new rounds on ``rows`` ``(N,)`` bool, on ``queries`` with ``noise`` (``(N,)``, read on ``rows``)."""
        if not rows.any():
            return
        index = np.flatnonzero(rows)  # (R,)
        fresh = queries[index]  # (R,)
        self.queries[index] = fresh
        self.tokens[index] = self.problem.eos_token_id
        self.lengths[index] = 0
        self.finished[index] = False
        self.last_tokens[index] = self._query_last_tokens[fresh]
        self.noise[index] = noise[index]
        initial = self.problem.initial_carry(torch.from_numpy(fresh))  # (R, *c)
        self.carry = self.carry.index_copy(0, torch.from_numpy(index), initial)
        self._candidates_current = False

    def advance(self, tokens: np.ndarray) -> None:
        """Append ``tokens`` ``(N,)`` int64 to every row.

        A row that is unfinished and shorter than L must get EOS at position L (the env forces
        it); the other rows (those whose round ended last step) must be restarted before they
        are read: they take a throwaway token at column ``min(|y|, L - 1)``.
        """
        problem = self.problem
        columns = np.minimum(self.lengths, problem.max_length - 1)  # (N,)
        positions = columns + 1  # (N,) 1-based position of the new token
        if self._candidate_carries is not None and self._candidates_current:
            # the chosen candidate's carry, as observe() got it from the core (equal to append's)
            candidates = self._candidate_carries.reshape(-1, *self.carry.shape[1:])  # (N * n, *c)
            chosen = self._rows * self.problem.vocab_size + tokens  # (N,) flat candidate index
            self.carry = torch.from_numpy(np.take(candidates, chosen, axis=0))  # (N, *c)
        else:
            self.carry = problem.append(
                torch.from_numpy(self.queries),
                self.carry,
                torch.from_numpy(self.last_tokens),
                torch.from_numpy(tokens[:, None]),
                torch.from_numpy(positions),
            )[:, 0]
        self._candidates_current = False
        self.tokens[self._rows, columns] = tokens
        self.lengths = positions
        self.finished = tokens == problem.eos_token_id
        self.last_tokens = tokens.copy()

    def observe(self) -> dict[str, np.ndarray]:
        """The batched observation (new arrays), keyed as the single env's; updates :attr:`mask`."""
        mask_rows = self._mask_rows()  # (N,)
        # np.take: a row gather several times faster than fancy indexing at large N
        self.mask = np.take(self._masks.allowed, mask_rows, axis=0)  # (N, n)
        embeddings = None
        if self._has_embeddings:
            assert isinstance(self.problem, LinearTokenizedProblem)
            if self._candidate_carries is None:
                shape = (self.num_rows, self.problem.vocab_size, *self.carry.shape[1:])
                self._candidate_carries = np.empty(shape, dtype=self.carry.numpy().dtype)
            carries_out = torch.from_numpy(self._candidate_carries)
            embeddings = self.problem.observed_candidate_embeddings(self.state(), carries_out).numpy()  # (N, n, d)
            self._candidates_current = True
            embeddings[self.finished] = 0.0  # the single env observes zeros once the response is complete
        return observation(
            query=np.take(self._query_tokens, self.queries, axis=0),  # (N, Lq)
            query_length=np.take(self._query_lengths, self.queries),  # (N,)
            response=self.tokens.copy(),  # (N, L)
            length=self.lengths.copy(),  # (N,)
            candidate_tokens=self._candidate_tokens.copy(),  # (N, n)
            action_mask=np.take(self._masks.allowed_int8, mask_rows, axis=0),  # (N, n)
            candidate_embeddings=embeddings,  # (N, n, d) or None
        )

    def round_summary(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        """Round-end info entries for every row (zeros, or None, off the rows ``ended`` ``(N,)`` bool).

        The utilities come from one core call on the whole batch; everything else is written
        on the ended rows only.
        """
        problem = self.problem
        benchmarks = self.benchmarks()
        state = self.state()
        index = np.flatnonzero(ended)  # (E,)
        queries = self.queries[index]  # (E,)
        kind = np.full(self.num_rows, None, dtype=object)
        kind[index] = "exact"
        embedding = None
        if isinstance(problem, LinearTokenizedProblem):
            embedding = problem.embedding_of(state).to(torch.float32).numpy()[index]  # (E, d)
        return round_summary(  # every entry on the E ended rows, scattered into zeros of N rows
            utility=problem.utility_of_complete(state).to(torch.float64).numpy()[index],  # (E,)
            optimal_utility=benchmarks.optimal_utility[queries].astype(np.float64),  # (E,)
            oracle_greedy_utility=benchmarks.oracle_greedy_utility[queries],  # (E,)
            optimal_kind=kind,  # (N,)
            noise=self.noise[index],  # (E,)
            response=self.tokens[index],  # (E, L)
            response_length=self.lengths[index],  # (E,)
            optimal_response=np.take(benchmarks.optimal_responses, queries, axis=0),  # (E, L)
            response_embedding=embedding,
            ended=ended,
            ended_rows_only=True,
        )

    def _mask_rows(self) -> np.ndarray:
        """Each row's row of the mask table, ``(N,)`` (its length, or ``L + 1`` once complete)."""
        return np.where(self.finished, self.problem.max_length + 1, self.lengths)
