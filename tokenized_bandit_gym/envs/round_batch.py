"""The round batch: B rounds of one instance, what every Gymnasium shell steps.

:class:`RoundBatch` is the interface (restart, advance, observe and the round summary of B
rounds); the shells (the single env, the native vector env, the PettingZoo arena) only draw the
rounds, check the actions with the env contract (:mod:`~tokenized_bandit_gym.envs.env_contract`)
and call it. The implementations:

* :class:`SingleRoundBatch`: B = 1 of a synthetic instance on the host, its rows without the row
  axis, stepped through the per-query prefix memo (the single env);
* :class:`HostRoundBatch`: B = N rows of a synthetic instance on the CPU, bookkeeping in NumPy
  (the vector env's NumPy backend and the arena on the CPU: the measured CPU speed);
* :class:`DeviceRoundBatch`: B = N rows of a synthetic instance as the core's tensors on its
  device, no host round trip per step (the torch backend, and any accelerator);
* :class:`~tokenized_bandit_gym.envs.language_model_round_batch.LanguageModelRoundBatch`: B rows
  of the LLM core's KV-cached state (the LLM single env at B = 1, its vector env and arena).

The synthetic ones read the same host tables (:class:`SyntheticTables`: the action mask by
length, the query pool, the pool's benchmarks), built once per instance and shared.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from tokenized_bandit_gym.core.action_mask_table import ActionMaskTable
from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.pool_benchmarks import PoolBenchmarks
from tokenized_bandit_gym.core.query_start_memo import (
    QueryStartMemo,
    TablePrefixMemo,
    prefix_memo,
)
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.envs import carry_table_kernels as kernels
from tokenized_bandit_gym.envs.env_contract import (
    ROUND_VALUE_KEYS,
    InfoSchema,
    observation,
    round_summary,
    rows_observation,
)
from tokenized_bandit_gym.host_array import as_host_array

Rows = TypeVar("Rows")
"""What a round batch's rows are: ``np.ndarray`` on the host, ``torch.Tensor`` on a device (scalars at B = 1)."""

_NO_UTILITIES = np.zeros(0)
"""The utilities handed to the kernels when no round ended (none is read)."""


class RoundBatch(ABC, Generic[Rows]):
    """B rounds of one instance: the bookkeeping a shell steps (the dynamics are the core's).

    A shell draws the rounds, checks the actions and calls, per step: :meth:`advance`,
    :meth:`round_summary` on the rows whose round ended, :meth:`restart` on the rows that start a
    new one, :meth:`observe`. The vector env checks N actions at once with :meth:`allowed`, the
    contract's :func:`~tokenized_bandit_gym.envs.env_contract.forced_and_refused` and
    :meth:`forced_actions`; a shell that checks one action at a time (a single env, an arena
    player) uses the contract's :func:`~tokenized_bandit_gym.envs.env_contract.check_action`,
    which gives the forced EOS's action itself.

    Rows are NumPy arrays when :attr:`on_host`, else tensors on the instance's device. The
    attributes are the batch's state: a shell copies what it hands out of them. What
    :meth:`observe` and :meth:`round_summary` return is new, and no two entries share memory.

    Attributes:
        problem: the instance.
        num_rows: B.
        on_host: whether the rows are NumPy arrays.
        queries, lengths, finished, noise: each row's query index, tokens chosen so far, whether
            its response is complete and its reward noise (``(B,)``).
        mask: the allowed actions now, ``(B, k)`` bool (read, never write).
        info_schema: the info entries every step reports (:class:`InfoSchema`).
    """

    problem: Any  # a TokenizedProblem, or the LLM's LanguageModelProblem
    num_rows: int
    on_host: bool
    info_schema: InfoSchema
    queries: Rows
    lengths: Rows
    finished: Rows
    noise: Rows
    mask: Rows

    @abstractmethod
    def restart(self, rows: Rows, queries: Rows, noise: Rows) -> None:
        """Start new rounds on ``rows`` ``(B,)`` bool, on ``queries`` with ``noise`` (``(B,)``, read on ``rows``)."""

    def forced_actions(self, actions: Any, forced_eos: Any) -> Any:
        """``actions`` ``(B,)`` with the EOS action on the rows ``forced_eos`` ``(B,)``.

        Written for tensor rows: at position L the EOS action is the only allowed one, so it is
        each row's first allowed action (the synthetic batches, whose EOS action is the EOS token
        id, override it).
        """
        mask: torch.Tensor = self.mask  # type: ignore[assignment]
        return torch.where(forced_eos, mask.int().argmax(dim=1), actions)  # (B,)

    @abstractmethod
    def advance(self, actions: Rows, stepping: Rows) -> None:
        """Append the candidates ``actions`` ``(B,)`` (EOS already forced) on the rows ``stepping`` ``(B,)`` bool.

        A stepping row is unfinished and shorter than L. The other rows are never read again
        before their next :meth:`restart` (the vector env restarts them in this step; the arena's
        finished players wait for the next round): an implementation may leave them as they
        were or let them take a throwaway token, whichever is cheaper.
        """

    @abstractmethod
    def observe(self) -> dict[str, Any]:
        """The observation of every row (new arrays), keyed as the contract's; updates :attr:`mask`."""

    @abstractmethod
    def round_summary(self, ended: Rows) -> dict[str, Any]:
        """The contract's round-end info entries, set on the rows ``ended`` ``(B,)`` bool (fill values elsewhere).

        Every key of :attr:`info_schema` is present, whether or not some row ended.
        """

    def pending_summary(self) -> dict[str, Any]:
        """The round summary of B rows none of which ended: the schema's fill values, as the batch's rows."""
        return self.info_schema.pending(self.num_rows, None if self.on_host else self.problem.device)

    def allowed(self, actions: Any) -> tuple[Any, Any]:
        """Whether each row's action is allowed by :attr:`mask`, and whether it is out of ``[0, k)``: ``(B,)`` each.

        Written for tensor rows (one gather on the device); the host batches override it.
        """
        mask: torch.Tensor = self.mask  # type: ignore[assignment]
        num_actions = mask.shape[1]
        out_of_range = (actions < 0) | (actions >= num_actions)  # (B,)
        return mask.gather(1, actions.clamp(0, num_actions - 1)[:, None])[:, 0], out_of_range


class SyntheticTables:
    """The host tables every synthetic round batch of one instance reads, built once and shared.

    Args:
        problem: the instance.

    Attributes:
        masks: the action mask by length (:class:`ActionMaskTable`).
        query_tokens: ``(Q, Lq)`` int64 the query pool, padded with EOS.
        query_lengths: ``(Q,)`` int64.
        has_embeddings: whether the family has features (a :class:`LinearTokenizedProblem`).
        info_schema: the info entries of the instance's envs.
    """

    def __init__(self, problem: TokenizedProblem) -> None:
        self.problem = problem
        self.masks = ActionMaskTable(problem)
        self.query_tokens = as_host_array(problem.query_tokens).astype(np.int64)  # (Q, Lq)
        self.query_lengths = as_host_array(problem.query_lengths).astype(np.int64)  # (Q,)
        self.has_embeddings = isinstance(problem, LinearTokenizedProblem)
        embedding_dim = problem.embedding_dim if isinstance(problem, LinearTokenizedProblem) else None
        self.info_schema = InfoSchema(problem.max_length, embedding_dim)
        self._pool_benchmarks: PoolBenchmarks | None = None

    def benchmarks(self) -> PoolBenchmarks:
        """Every query's exact optimum, oracle greedy utility and optimal response (built on first use)."""
        if self._pool_benchmarks is None:
            self._pool_benchmarks = PoolBenchmarks.from_problem(self.problem)
        return self._pool_benchmarks


class SingleRoundBatch(RoundBatch[Any]):
    """B = 1 on the host: one round, its rows without the row axis, stepped through the prefix memo.

    Per step only what depends on the action goes through torch, once per prefix: the mask is
    looked up, every prefix played (the round start included) and its candidates are memoised
    per query (:func:`~tokenized_bandit_gym.core.query_start_memo.prefix_memo`: from the family's
    carry table in NumPy where it has one), the complete response's utility once per response. The
    single env checks its one action with the contract's ``check_action``; :meth:`allowed` and
    :meth:`forced_actions`, the N-row check, do not apply to rows without the row axis.

    Args:
        problem: the instance (any device: the memo reads its values back to the host).
        tables: the instance's shared tables (built here if None).

    Attributes:
        queries: the round's query index (int).
        lengths: tokens chosen so far (int).
        finished: whether the response is complete (bool).
        noise: the round's reward noise (float).
        mask: ``(n,)`` bool the allowed actions now.
        memo: the per-query prefix memo.
        node: the memo's node of the current prefix (None before the first :meth:`restart`).
    """

    on_host = True

    def __init__(self, problem: TokenizedProblem, tables: SyntheticTables | None = None) -> None:
        self.problem = problem
        self.num_rows = 1
        self.tables = SyntheticTables(problem) if tables is None else tables
        self.info_schema = self.tables.info_schema
        self._has_embeddings = self.tables.has_embeddings
        self._masks = self.tables.masks
        n = problem.vocab_size
        self.memo: QueryStartMemo | TablePrefixMemo = prefix_memo(problem, with_candidates=self._has_embeddings)
        self._token_tensors = [problem.vocabulary[token : token + 1] for token in range(n)]  # n x (1,)
        self._candidate_tokens = np.arange(n, dtype=np.int64)  # (n,)
        self._no_embeddings: np.ndarray | None = None
        if isinstance(problem, LinearTokenizedProblem):
            self._no_embeddings = np.zeros((n, problem.embedding_dim), dtype=np.float32)  # (n, d)
        # The memo's node of the current prefix: a QueryStart of a QueryStartMemo, a TablePrefix of a
        # TablePrefixMemo (never mixed, which a union of the two cannot say), None before the first restart.
        self.node: Any = None
        self.response = np.full(problem.max_length, problem.eos_token_id, dtype=np.int64)  # (L,) the tokens
        self.queries = 0
        self.lengths = 0
        self.finished = False
        self.noise = 0.0
        # The shared tables' rows as tuples of views (never written): a step indexes a tuple, not an array
        self._query_rows = tuple(self.tables.query_tokens)  # Q x (Lq,)
        self._query_lengths = tuple(self.tables.query_lengths)  # Q NumPy scalars (immutable: handed out as they are)
        self._allowed_rows = tuple(self._masks.allowed)  # (L + 2) x (n,) bool
        self._allowed_int8_rows = tuple(self._masks.allowed_int8)  # (L + 2) x (n,) int8
        self._length_scalars = tuple(np.int64(length) for length in range(problem.max_length + 1))  # |y| as NumPy
        self.mask = self._allowed_rows[self._masks.row(0, finished=False)]  # (n,)
        self._complete_row = self._masks.row(problem.max_length, finished=True)  # the mask table's row once complete

    def restart(self, rows: Any, queries: Any, noise: Any) -> None:
        """Start a new round (``rows`` is ignored: the one row) on query ``queries`` (int) with ``noise`` (float)."""
        self.queries, self.noise = queries, noise
        self.node = self.memo.get(queries)
        self.response.fill(self.problem.eos_token_id)
        self.lengths = 0
        self.finished = False

    def advance(self, tokens: Any, stepping: Any = True) -> None:
        """Append the token ``tokens`` (int; ``stepping``: the one row): a memo read for a prefix played before."""
        eos = self.problem.eos_token_id
        self.node = self.memo.child(self.queries, self.node, tokens, self._token_tensors[tokens])
        self.response[self.lengths] = tokens
        self.lengths += 1
        self.finished = tokens == eos

    def observe(self) -> dict[str, Any]:
        """The round's observation (host copies throughout); updates :attr:`mask`."""
        query, node = self.queries, self.node
        row = self._complete_row if self.finished else self.lengths  # masks.row(), unchecked: 0 <= |y| <= L here
        self.mask = self._allowed_rows[row]
        embeddings = None
        if self._no_embeddings is not None:
            observed = None if self.finished or node is None else self.memo.observed_embeddings(query, node)
            embeddings = self._no_embeddings.copy() if observed is None else observed  # zeros once complete
        return observation(
            query=self._query_rows[query].copy(),
            query_length=self._query_lengths[query],  # a NumPy scalar (immutable: nothing to copy)
            response=self.response.copy(),
            length=self._length_scalars[self.lengths],  # a NumPy scalar (immutable: nothing to copy)
            candidate_tokens=self._candidate_tokens.copy(),
            action_mask=self._allowed_int8_rows[row].copy(),
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
        benchmarks, query = self.tables.benchmarks(), self.queries
        if node.round_end is None:  # the complete response's utility and embedding, once per response
            node.round_end = self.memo.round_end(node, query, self.response)
        utility, embedding = node.round_end
        return round_summary(
            utility=utility,
            optimal_utility=float(benchmarks.optimal_utility[query]),
            oracle_greedy_utility=float(benchmarks.oracle_greedy_utility[query]),
            noise=float(self.noise),
            response=self.response.copy(),  # (L,) padded with EOS
            response_length=int(self.lengths),
            optimal_response=benchmarks.optimal_responses[query].copy(),
            response_embedding=None if embedding is None else embedding.copy(),
        )


class HostRoundBatch(RoundBatch[np.ndarray]):
    """The state of N rounds on the host, stepped with the core's own batched calls.

    The dynamics are the core's, as in the vector env's torch path: the chosen tokens' carries
    come from :meth:`TokenizedProblem.append`, the observed embeddings from
    :meth:`LinearTokenizedProblem.observed_candidate_embeddings`, the utilities from
    :meth:`TokenizedProblem.utility_of_complete`, each called once per step on the whole batch
    (torch on the CPU, reading the host arrays without copies). What is of size N or
    ``(N, L)`` (tokens, lengths, flags, the mask, the round-end entries) is NumPy, where an
    operation costs about a microsecond and a torch dispatch about ten: at small N that is
    most of a step. The mask and the round's benchmarks are read from the instance's
    :class:`SyntheticTables`, the same the single env's :class:`SingleRoundBatch` reads. Where
    the family's carry recursion is a table (:meth:`TokenizedProblem.host_carry_rows`: the
    discounted TLB and the TMAB over it), a step makes no torch call but the round-end
    utilities (one core call on the batch's own tensors, built once; the rows not ended are
    computed and dropped, cheaper below N = 1,024 than gathering the ended ones): the action
    check, the chosen carries, the round summary, the restarts and the float32 observed
    embeddings are compiled loops over the rows (:mod:`~tokenized_bandit_gym.envs.carry_table_kernels`;
    the vector env steps it with :meth:`begin_table_step` and :meth:`end_table_step`), with
    the core's float operations (so the same bits).

    Every array the batch hands out is a new one (never a view of its state). The state's
    arrays are updated in place (the carry too, on the table path), so its tensors stay views.

    Args:
        problem: the instance (on the CPU).
        num_rows: N.
        tables: the instance's shared tables (built here if None).

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

    on_host = True

    def __init__(self, problem: TokenizedProblem, num_rows: int, tables: SyntheticTables | None = None) -> None:
        if problem.device.type != "cpu":  # its arithmetic is NumPy's
            raise ValueError(f"{type(self).__name__} needs an instance on the CPU, got device {problem.device}")
        self.problem = problem
        self.num_rows = num_rows
        self.tables = SyntheticTables(problem) if tables is None else tables
        self.info_schema = self.tables.info_schema
        self._masks = self.tables.masks
        self._has_embeddings = self.tables.has_embeddings
        length = problem.max_length
        self._query_last_tokens = problem.query_last_tokens.numpy().astype(np.int64)  # (Q,)
        self._candidate_tokens = np.tile(np.arange(problem.vocab_size, dtype=np.int64), (num_rows, 1))  # (N, n)
        self._rows = np.arange(num_rows)  # (N,)
        self._row_offsets = self._rows * problem.vocab_size  # (N,) each row's start in the flat mask
        self._token_offsets = self._rows * length  # (N,) each row's start in the flat responses
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
        # The family's carry recursion as a NumPy table, where it has one: then every step is two compiled
        # calls (carry_table_kernels: the chosen carry, the observed embeddings, the summary), the carry in place.
        carry_rows = problem.host_carry_rows()  # (alpha, (Q * (L + 1), n, *c)) or None
        self._host_carry = self.carry.numpy()  # (N, *c) the carry's memory (the table path writes it in place)
        self._every_row: DecodingState | None = None  # the carry-table path's state, its tensors on the arrays
        self._alpha: np.floating[Any] = np.float64(0.0)  # the carry table's discount, in the carries' dtype
        self._table: np.ndarray | None = None  # (Q * (L + 1), n, *c) the carry table
        self._benchmark_utilities: np.ndarray | None = None  # (2, Q) float64, built on first use
        self._kernel_tables: tuple[Any, ...] | None = None  # carry_table_kernels.TABLES, built on first use
        if carry_rows is not None:
            alpha, self._table = carry_rows
            self._alpha = self._table.dtype.type(alpha)  # alpha * carry in the carries' dtype, as NumPy's scalar
            self._every_row = self.state()  # every field is updated in place on this path
        self.mask = self._masks.allowed[self._mask_rows()]

    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle, without the tensors that view the arrays (a copy would no longer share them)."""
        return {**self.__dict__, "carry": None, "_every_row": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore the pickled state and view the restored arrays again (the carry's memory is the host one)."""
        self.__dict__.update(state)
        self.carry = torch.from_numpy(self._host_carry)
        if self._table is not None:
            self._every_row = self.state()

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
        index = rows.nonzero()[0]  # (R,)
        self.restart_rows(index, queries.take(index), noise.take(index))

    def restart_rows(self, index: np.ndarray, queries: np.ndarray, noise: np.ndarray) -> None:
        """:meth:`restart` on the rows ``index`` ``(R,)`` (distinct), on ``queries`` with ``noise`` (``(R,)`` each)."""
        if not len(index):
            return
        if self._table is not None:
            kernels.restart(index, queries, noise, self.kernel_state(), self.kernel_tables())
            return
        self.queries.put(index, queries)
        self.tokens[index] = self.problem.eos_token_id
        self.lengths.put(index, 0)
        self.finished.put(index, False)
        self.last_tokens.put(index, self._query_last_tokens.take(queries))
        self.noise.put(index, noise)
        initial = self.problem.initial_carry(torch.from_numpy(queries))  # (R, *c)
        self.carry = self.carry.index_copy(0, torch.from_numpy(index), initial)
        self._host_carry = self.carry.numpy()
        self._candidates_current = False

    def allowed(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether each row's int64 action ``(N,)`` is allowed, and whether it is out of ``[0, n)``: ``(N,)`` each.

        The first is meaningless on the rows out of range (they read a clipped entry), which the
        shell refuses before reading it.
        """
        out_of_range = actions.view(np.uint64) >= self.problem.vocab_size  # (N,) a negative int64 is >= 2**63
        return self.mask.take(self._row_offsets + actions, mode="clip"), out_of_range

    def forced_actions(self, actions: np.ndarray, forced_eos: np.ndarray) -> np.ndarray:
        """``actions`` ``(N,)`` with the EOS token on the rows ``forced_eos`` ``(N,)`` (an action is a token id)."""
        if not np.count_nonzero(forced_eos):  # the usual step: no row forced, nothing to copy
            return actions
        return np.where(forced_eos, self.problem.eos_token_id, actions)

    def advance(self, tokens: np.ndarray, stepping: np.ndarray | None = None) -> None:
        """Append ``tokens`` ``(N,)`` int64 to the rows ``stepping`` ``(N,)`` bool (None: every row).

        A stepping row is unfinished and shorter than L and gets EOS at position L (the shell
        forces it). The rows that do not step restart in this step: the carry-table path leaves
        them as they are; the others take a throwaway token at column ``min(|y|, L - 1)``,
        cheaper than selecting rows on every field.
        """
        problem = self.problem
        if self._table is not None:  # alpha * e + (c * phi)[x, |y|, tau], in place: append's float operations
            every_row = np.ones(self.num_rows, dtype=bool) if stepping is None else stepping
            kernels.advance(
                tokens,
                np.zeros(self.num_rows, dtype=bool),
                every_row,
                self.kernel_state(),
                self.kernel_tables(),
                np.empty(self.num_rows, dtype=bool),
            )
            return
        length = problem.max_length
        columns = np.minimum(self.lengths, length - 1)  # (N,)
        positions = np.add(columns, 1, out=self.lengths)  # (N,) 1-based position of the new token, the new lengths
        if self._candidate_carries is not None and self._candidates_current:
            # the chosen candidate's carry, as observe() got it from the core (equal to append's)
            candidates = self._candidate_carries.reshape(-1, *self.carry.shape[1:])  # (N * n, *c)
            chosen = self._row_offsets + tokens  # (N,) flat candidate index
            self.carry = torch.from_numpy(candidates.take(chosen, axis=0))  # (N, *c)
            self._host_carry = self.carry.numpy()
        else:
            self.carry = problem.append(
                torch.from_numpy(self.queries),
                self.carry,
                torch.from_numpy(self.last_tokens),
                torch.from_numpy(tokens[:, None]),
                torch.from_numpy(positions),
            )[:, 0]
            self._host_carry = self.carry.numpy()
        self._candidates_current = False
        self.tokens.put(self._token_offsets + columns, tokens)
        np.equal(tokens, problem.eos_token_id, out=self.finished)
        self.last_tokens[...] = tokens

    def observe(self) -> dict[str, np.ndarray]:
        """The batched observation (new arrays), keyed as the single env's; updates :attr:`mask`."""
        if self._table is not None:
            ints = np.empty((4, self.num_rows), dtype=np.int64)  # (4, N) rows as in carry_table_kernels.INT_ROWS
            tokens = np.empty((1, *self.tokens.shape), dtype=np.int64)  # (1, N, L) the observation's response
            observed = kernels.observe(self.kernel_state(), self.kernel_tables(), ints, tokens, self._has_embeddings)
            return self.observation_of(*observed, ints, tokens[-1])
        mask_rows = self._mask_rows()  # (N,)
        # take: a row gather several times faster than fancy indexing at large N (the method: no wrapper)
        self.mask = self._masks.allowed.take(mask_rows, axis=0)  # (N, n)
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
            query=self.tables.query_tokens.take(self.queries, axis=0),  # (N, Lq)
            query_length=self.tables.query_lengths.take(self.queries),  # (N,)
            response=self.tokens.copy(),  # (N, L)
            length=self.lengths.copy(),  # (N,)
            candidate_tokens=self._candidate_tokens.copy(),  # (N, n)
            action_mask=self._masks.allowed_int8.take(mask_rows, axis=0),  # (N, n)
            candidate_embeddings=embeddings,  # (N, n, d) or None
        )

    def observation_of(
        self,
        query: np.ndarray,
        candidate_tokens: np.ndarray,
        action_mask: np.ndarray,
        embeddings: np.ndarray,
        ints: np.ndarray,
        response: np.ndarray,
    ) -> dict[str, np.ndarray]:
        """The observation dict of the kernels' arrays (``ints`` ``(4, N)`` as ``carry_table_kernels.INT_ROWS``)."""
        return observation(
            query=query,  # (N, Lq)
            query_length=ints[3],  # (N,)
            response=response,  # (N, L)
            length=ints[2],  # (N,)
            candidate_tokens=candidate_tokens,  # (N, n)
            action_mask=action_mask,  # (N, n)
            candidate_embeddings=embeddings if self._has_embeddings else None,  # (N, n, d) or None
        )

    def round_summary(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        """Round-end info entries for every row (the schema's fill values off the rows ``ended`` ``(N,)`` bool).

        Where the family's carry is a table, the utility is one core call on the batch's own
        tensors (no per-step tensors to build; the rows not ended are computed and dropped) and
        every entry is written by :func:`carry_table_kernels.summarise` (the embedding is the
        carry). Otherwise the utilities and embeddings come from one core call each on the
        ended rows (a row's value does not depend on its batch), and every entry is computed on
        those rows only.
        """
        problem = self.problem
        if self._table is not None:
            values, ints, tokens, embedding = kernels.summarise(
                ended, self._utilities(), self.kernel_state(), self.kernel_tables(), 2, self._has_embeddings
            )
            return self.summary_entries(values, ints, tokens, embedding, ended.copy())
        benchmarks = self.tables.benchmarks()
        index = ended.nonzero()[0]  # (E,)
        queries = self.queries[index]  # (E,)
        state = DecodingState(
            queries=torch.from_numpy(queries),
            tokens=torch.from_numpy(self.tokens[index]),
            lengths=torch.from_numpy(self.lengths[index]),
            finished=torch.from_numpy(self.finished[index]),
            carry=torch.from_numpy(self._host_carry[index]),
            last_tokens=torch.from_numpy(self.last_tokens[index]),
        )  # the E ended rows
        ended_embedding = None
        if isinstance(problem, LinearTokenizedProblem):
            ended_embedding = problem.embedding_of(state).to(torch.float32).numpy()  # (E, d)
        return round_summary(  # every entry on the E ended rows, scattered into fill values of N rows
            utility=problem.utility_of_complete(state).numpy().astype(np.float64, copy=False),  # (E,)
            optimal_utility=benchmarks.optimal_utility[queries].astype(np.float64, copy=False),  # (E,)
            oracle_greedy_utility=benchmarks.oracle_greedy_utility[queries],  # (E,)
            noise=self.noise[index],  # (E,)
            response=state.tokens.numpy(),  # (E, L)
            response_length=state.lengths.numpy(),  # (E,)
            optimal_response=benchmarks.optimal_responses.take(queries, axis=0),  # (E, L)
            response_embedding=ended_embedding,
            ended=ended,
            ended_rows=index,
        )

    @property
    def has_carry_table(self) -> bool:
        """Whether the family's carry is a table (then :meth:`begin_table_step` and :meth:`end_table_step` step it)."""
        return self._table is not None

    @functools.cached_property
    def summary_keys(self) -> tuple[str, ...]:
        """The keys of :meth:`summary_entries`, in :func:`round_summary`'s order."""
        embedding = ("response_embedding",) if self._has_embeddings else ()
        return (*ROUND_VALUE_KEYS, "response", "response_length", "optimal_response", *embedding, "round_ended")

    def summary_entries(
        self, values: np.ndarray, ints: np.ndarray, tokens: np.ndarray, embedding: np.ndarray, round_ended: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The round summary's entries, keyed as :func:`round_summary`, from the kernels' buffers (rows of them).

        Args:
            values: ``(6, N)`` float64 (``carry_table_kernels.VALUE_ROWS``).
            ints: ``(4, N)`` int64 (``carry_table_kernels.INT_ROWS``).
            tokens: ``(T, N, L)`` int64 (``carry_table_kernels.TOKEN_ROWS``).
            embedding: ``(N, d)`` float32 (read where the family has features).
            round_ended: ``(N,)`` bool, a new array.
        """
        entries = (*values[: len(ROUND_VALUE_KEYS)], tokens[0], ints[1], tokens[1])
        if self._has_embeddings:
            entries += (embedding,)
        return dict(zip(self.summary_keys, (*entries, round_ended), strict=True))

    def begin_table_step(
        self, tokens: np.ndarray, stepping: np.ndarray, strict: bool, num_masks: int
    ) -> tuple[np.ndarray, bool, int]:
        """The carry-table path's action check and advance (:func:`carry_table_kernels.begin_step`).

        Args:
            tokens: ``(N,)`` int64 the actions.
            stepping: ``(N,)`` bool the rows that append a token.
            strict: refuse a masked action at position L too.
            num_masks: K, the infos' ``_key`` masks (rows of the returned flags).

        Returns:
            The ``(4 + K, N)`` bool flags (``forced_eos``, ``terminated``, ...), whether some
            action is invalid (then nothing was advanced) and how many rounds ended.
        """
        assert self._table is not None
        flags, invalid, num_ended = kernels.begin_step(
            tokens, stepping, self.kernel_state(), self.kernel_tables(), strict, num_masks
        )
        return flags, bool(invalid), int(num_ended)

    def end_table_step(
        self,
        flags: np.ndarray,
        num_ended: int,
        restart_index: np.ndarray,
        new_queries: np.ndarray,
        new_noise: np.ndarray,
        autoreset: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        """The carry-table path's summary, restart and observation (:func:`carry_table_kernels.end_step`).

        Args:
            flags: :meth:`begin_table_step`'s flags (the rest of its rows written here).
            num_ended: how many rounds ended (none: the core's utility is not called).
            restart_index: ``(R,)`` the rows that start their next round.
            new_queries: ``(R,)`` int64 their queries.
            new_noise: ``(R,)`` float64 their reward noise.
            autoreset: ``(N,)`` bool the shell's state, set to the rows that ended.

        Returns:
            ``values``, ``ints``, ``tokens``, ``embedding`` (as :meth:`summary_entries` reads
            them) and the observation's ``query``, ``candidate_tokens``, ``action_mask`` and
            ``candidate_embeddings`` (as :meth:`observation_of` reads them).
        """
        return kernels.end_step(
            flags,
            self._utilities() if num_ended else _NO_UTILITIES,
            restart_index,
            new_queries,
            new_noise,
            autoreset,
            self.kernel_state(),
            self.kernel_tables(),
            self._has_embeddings,
        )

    def _utilities(self) -> np.ndarray:
        """The core's utility of every row, ``(N,)`` float64 (one call on the batch's own tensors)."""
        assert self._every_row is not None
        return self.problem.utility_of_complete(self._every_row).numpy().astype(np.float64, copy=False)

    def kernel_state(self) -> tuple[np.ndarray, ...]:
        """The batch's state as the kernels take it (``carry_table_kernels.STATE``: the arrays themselves)."""
        return (
            self.queries,
            self.lengths,
            self.finished,
            self.last_tokens,
            self.noise,
            self.tokens,
            self._host_carry,
            self.mask,
        )

    def kernel_tables(self) -> tuple[Any, ...]:
        """The instance's tables as the kernels take them (``carry_table_kernels.TABLES``), built once."""
        if self._kernel_tables is None:
            assert self._table is not None
            benchmark_utilities, optimal_responses = self._host_benchmarks()
            self._kernel_tables = (
                self._table,
                self._alpha,
                self.problem.eos_token_id,
                self._query_last_tokens,
                self.tables.query_tokens,
                self.tables.query_lengths,
                self._masks.allowed,
                self._masks.allowed_int8,
                benchmark_utilities,
                optimal_responses,
            )
        return self._kernel_tables

    def _host_benchmarks(self) -> tuple[np.ndarray, np.ndarray]:
        """The pool's benchmarks as the round summary gathers them, built on first use.

        Returns:
            ``(2, Q)`` float64 the optimal and the oracle greedy utility (the regret is computed
            in float64 whatever the instance's dtype), and ``(Q, L)`` int64 the optimal responses.
        """
        if self._benchmark_utilities is None:
            benchmarks = self.tables.benchmarks()
            self._benchmark_utilities = np.stack([benchmarks.optimal_utility, benchmarks.oracle_greedy_utility]).astype(
                np.float64
            )
        return self._benchmark_utilities, self.tables.benchmarks().optimal_responses

    def _mask_rows(self) -> np.ndarray:
        """Each row's row of the mask table, ``(N,)`` (its length, or ``L + 1`` once complete)."""
        return self._masks.rows(self.lengths, self.finished)


class DeviceRoundBatch(RoundBatch[torch.Tensor]):
    """The state of N rounds as the core's tensors on the instance's device: no host round trip per step.

    The state is the core's :class:`DecodingState`; a step is :meth:`TokenizedProblem.extend`
    on the whole batch, the observed embeddings come from
    :meth:`LinearTokenizedProblem.observed_candidate_embeddings` and the mask and the benchmarks
    are the instance's :class:`SyntheticTables`, put on the device once. The vector env's torch
    backend steps it (on any device), and so does its NumPy backend off the CPU; the tests hold
    it equal to :class:`HostRoundBatch`.

    Args:
        problem: the instance (any device).
        num_rows: N.
        tables: the instance's shared tables (built here if None).

    Attributes:
        state: the core's batched state (``queries``, ``tokens`` ``(N, L)``, ``lengths``,
            ``finished``, ``carry``, ``last_tokens``).
        noise: ``(N,)`` float64 the reward noise of each round.
        mask: ``(N, n)`` bool the allowed actions now.
    """

    on_host = False

    def __init__(self, problem: TokenizedProblem, num_rows: int, tables: SyntheticTables | None = None) -> None:
        self.problem = problem
        self.num_rows = num_rows
        self.tables = SyntheticTables(problem) if tables is None else tables
        self.info_schema = self.tables.info_schema
        device = problem.device
        self._on_cpu = device.type == "cpu"  # host checks are free here, a sync on an accelerator
        self._mask_table = torch.tensor(self.tables.masks.allowed, device=device)  # (L + 2, n) bool
        self._mask_table_int8 = torch.tensor(self.tables.masks.allowed_int8, device=device)  # (L + 2, n) int8
        self._candidate_tokens = torch.arange(problem.vocab_size, device=device).expand(num_rows, -1)  # (N, n)
        self._benchmark_utilities: torch.Tensor | None = None  # (Q, 2) float64, built on first use
        self._benchmark_responses: torch.Tensor | None = None  # (Q, L) int64
        self.state = problem.initial_state(torch.zeros(num_rows, dtype=torch.int64, device=device))
        self.noise = torch.zeros(num_rows, dtype=torch.float64, device=device)  # (N,)
        self.mask = self._mask_table[self._table_rows()]  # (N, n)

    @property
    def queries(self) -> torch.Tensor:  # type: ignore[override]
        """``(N,)`` int64 query index of each round."""
        return self.state.queries

    @property
    def lengths(self) -> torch.Tensor:  # type: ignore[override]
        """``(N,)`` int64 tokens chosen so far."""
        return self.state.lengths

    @property
    def finished(self) -> torch.Tensor:  # type: ignore[override]
        """``(N,)`` bool whether each response is complete."""
        return self.state.finished

    def restart(self, rows: torch.Tensor, queries: torch.Tensor, noise: torch.Tensor) -> None:
        """Start new rounds on ``rows`` ``(N,)`` bool (``torch.where`` on every field: no host read off the CPU)."""
        if self._on_cpu and not torch.compiler.is_compiling() and not bool(rows.any()):  # on the CPU, skip idle work
            return
        problem, state = self.problem, self.state
        carry_rows = rows.view(-1, *([1] * (state.carry.dim() - 1)))
        self.state = DecodingState(
            queries=torch.where(rows, queries, state.queries),
            tokens=state.tokens.masked_fill(rows[:, None], problem.eos_token_id),
            lengths=state.lengths.masked_fill(rows, 0),
            finished=state.finished & ~rows,
            carry=torch.where(carry_rows, problem.initial_carry(queries), state.carry),
            last_tokens=torch.where(rows, problem.query_last_tokens[queries], state.last_tokens),
        )
        self.noise = torch.where(rows, noise, self.noise)

    def forced_actions(self, actions: torch.Tensor, forced_eos: torch.Tensor) -> torch.Tensor:
        """``actions`` ``(N,)`` with the EOS token on the rows ``forced_eos`` ``(N,)`` (an action is a token id)."""
        return torch.where(forced_eos, self.problem.eos_token_id, actions)

    def advance(self, actions: torch.Tensor, stepping: torch.Tensor | None = None) -> None:
        """Append ``actions`` ``(N,)``: one :meth:`TokenizedProblem.extend` of the whole batch (``stepping`` not read).

        The rows that do not step take a throwaway token (at column L - 1 if they hold L
        tokens) instead of costing a row selection on every field. A stepping row is
        unfinished and shorter than L, and its action is EOS at position L, so ``extend``
        applies as is; it computes the chosen token's carry alone (``append`` equals the
        candidates' carries element for element, so each row matches the single env bit for bit).
        """
        problem = self.problem
        in_range = replace(self.state, lengths=self.state.lengths.clamp(max=problem.max_length - 1))
        self.state = problem.extend(in_range, actions)

    def observe(self) -> dict[str, torch.Tensor]:
        """The batched observation (new tensors on the device); updates :attr:`mask`.

        The mask is a row of the mask table (by length, or the complete-response row); the
        candidates' embeddings come rounded to float32 and are zero on complete responses.
        """
        problem, state = self.problem, self.state
        table_rows = self._table_rows()  # (N,)
        self.mask = self._mask_table[table_rows]  # (N, n)
        embeddings = None
        if self.tables.has_embeddings:
            assert isinstance(problem, LinearTokenizedProblem)
            embeddings = problem.observed_candidate_embeddings(state)  # (N, n, d) float32
            if self._on_cpu and not torch.compiler.is_compiling():  # zero only the finished rows (index_put scans all)
                embeddings.index_fill_(0, torch.nonzero(state.finished).flatten(), 0.0)
            else:  # no host round trip to find them
                embeddings.masked_fill_(state.finished[:, None, None], 0.0)
        return rows_observation(
            problem,
            state,
            self._candidate_tokens,
            action_mask=self._mask_table_int8[table_rows],  # (N, n)
            candidate_embeddings=embeddings,  # (N, n, d) float32 or None
        )

    def round_summary(self, ended: torch.Tensor) -> dict[str, Any]:
        """Round-end info entries for every row (zeros off the rows ``ended`` ``(N,)``), always every key.

        The rows are read from the pool's benchmarks and the utility of the complete responses,
        and masked by the contract's :func:`~tokenized_bandit_gym.envs.env_contract.round_summary`
        on the device (deciding whether any row ended would cost a host round trip).
        """
        return self.summary_of(self.state, self.noise, ended)

    def summary_of(self, state: DecodingState, noise: torch.Tensor, ended: torch.Tensor) -> dict[str, Any]:
        """:meth:`round_summary` of ``state``'s rows with ``noise`` ``(N,)`` (a captured step's, not the batch's)."""
        problem = self.problem
        pool_utilities, pool_responses = self._pool_benchmarks()
        benchmarks = pool_utilities[state.queries]  # (N, 2) optimal, oracle greedy
        embedding = None
        if isinstance(problem, LinearTokenizedProblem):
            embedding = problem.embedding_of(state).to(torch.float32)  # (N, d)
        return round_summary(
            utility=problem.utility_of_complete(state).to(torch.float64),  # (N,) complete on the rows that matter
            optimal_utility=benchmarks[:, 0],  # (N,)
            oracle_greedy_utility=benchmarks[:, 1],  # (N,)
            noise=noise,  # (N,)
            response=state.tokens,  # (N, L)
            response_length=state.lengths,  # (N,)
            optimal_response=pool_responses[state.queries],  # (N, L)
            response_embedding=embedding,
            ended=ended,
        )

    def _table_rows(self) -> torch.Tensor:
        """Each row's row of the mask table, ``(N,)`` (its length, or ``L + 1`` once complete)."""
        return self.tables.masks.rows(self.state.lengths, self.state.finished)

    def _pool_benchmarks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The benchmarks on the device: optimum and oracle greedy utility ``(Q, 2)`` float64, response ``(Q, L)``."""
        if self._benchmark_utilities is None or self._benchmark_responses is None:
            benchmarks = self.tables.benchmarks()
            utilities = np.stack([benchmarks.optimal_utility, benchmarks.oracle_greedy_utility], axis=1)  # (Q, 2)
            self._benchmark_utilities = torch.tensor(utilities, dtype=torch.float64, device=self.problem.device)
            self._benchmark_responses = torch.tensor(benchmarks.optimal_responses, device=self.problem.device)
        return self._benchmark_utilities, self._benchmark_responses
