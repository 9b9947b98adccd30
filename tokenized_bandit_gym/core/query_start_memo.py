"""What a round starts from, per query, and every prefix played since: computed once, reused after.

The state of a round after the prefix ``y`` of the response to query ``x`` (and the candidates
there) depends on ``x`` and ``y`` only, never on the agent, the noise or the round. So a
batch-of-one env keeps a trie per query: the root is the round start, a child per token appended.
Learning agents replay their responses often (GreedyETC submits each ``y:t:EOS`` N times, EOFUL
and TokenizedLinTS converge), and a step along a known edge is one dictionary read instead of the
core's torch calls. The values are the core's own outputs, stored once, so a replay is bit for bit
what a fresh computation gives.

Two tries, one interface (:func:`prefix_memo` picks): :class:`QueryStartMemo` stores the core's
states (any family, any device); :class:`TablePrefixMemo`, for the families whose carry recursion
is a NumPy table (:meth:`TokenizedProblem.host_carry_rows`: the discounted TLB and the TMAB over
it, on the CPU), stores a node's carry and float32 candidates only and computes a new one from the
table with the core's float operations (a few NumPy operations, no torch call), so a prefix played
for the first time costs about what a plain NumPy step does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_int

# The memo's size in bytes: a fraction of the memory available when it is made, at most a cap
# (queries are dropped first in, first out beyond it, with their prefixes; new prefixes are not
# memoised while the memo is full). Sized in bytes, not elements, so that a node of large d (whose
# candidates weigh n d floats) does not shrink the memo below the prefixes a learner replays.
MEMO_BYTE_CAP = 512 << 20
MEMO_AVAILABLE_FRACTION = 0.125
MEMO_FALLBACK_BYTES = 128 << 20  # where the available memory cannot be read
NODE_OVERHEAD_BYTES = 2048  # the Python objects of a node (its tensors, arrays, dict and dataclass)


def available_memory_bytes() -> int | None:
    """The physical memory available now, in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def memo_byte_budget() -> int:
    """The bytes a new memo may hold: :data:`MEMO_AVAILABLE_FRACTION` of the available memory, at most the cap."""
    available = available_memory_bytes()
    if available is None:
        return min(MEMO_BYTE_CAP, MEMO_FALLBACK_BYTES)
    return min(MEMO_BYTE_CAP, int(available * MEMO_AVAILABLE_FRACTION))


@dataclass(eq=False, slots=True)
class QueryStart:
    """One prefix ``x:y`` of a round (batch of one, nothing depends on actions): a node of the trie.

    Every tensor is shared by all rounds through this prefix: read it, never write into it (the
    core never does; it builds new tensors at every step).

    Attributes:
        state: ``B = 1`` state of ``x:y`` (:meth:`TokenizedProblem.initial_state` at the root).
        candidate_carries: ``(1, n, *c)`` :meth:`TokenizedProblem.candidate_carries` of
            ``state``, or None when the memo was built without candidates or ``y`` is complete.
        candidate_embeddings: ``(n, d)`` float32 ``e(x, y:tau)`` of every candidate, or None (no
            candidates, a family without features, or ``y`` complete).
        length: ``|y|``.
        host_embeddings: ``candidate_embeddings`` as a NumPy array (the same memory on the CPU), or None.
        children: token -> the node of ``x:y:token``, filled as tokens are played.
        round_end: the complete response's utility and float32 embedding ``(d,)`` (None for a
            family without features), as the env reports them; set by the env on first use.
    """

    state: DecodingState
    candidate_carries: torch.Tensor | None
    candidate_embeddings: torch.Tensor | None
    length: int = 0
    host_embeddings: np.ndarray | None = field(default=None, repr=False)
    children: dict[int, QueryStart] = field(default_factory=dict, repr=False)
    round_end: tuple[float, np.ndarray | None] | None = field(default=None, repr=False)


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
        carry = problem.initial_state(torch.zeros(1, dtype=torch.int64, device=problem.device)).carry  # (1, *c)
        carry_bytes = carry.numel() * carry.element_size()
        node_bytes = NODE_OVERHEAD_BYTES + 8 * (problem.max_length + 4) + carry_bytes  # tokens, lengths, ...
        if with_candidates:  # (1, n, *c) carries and (n, d) float32 embeddings
            node_bytes += problem.vocab_size * (carry_bytes + 4 * (problem.embedding_dim or 0))
        self.capacity = max(1, memo_byte_budget() // node_bytes)  # nodes: round starts and prefixes
        self._starts: dict[int, QueryStart] = {}
        self._prefix_counts: dict[int, int] = {}  # query -> prefixes memoised below its start
        self._nodes = 0
        # On the CPU a child state is assembled from host values (no torch kernel): the same
        # tensors TokenizedProblem.extend computes, since the node knows |y| and its tokens.
        self._on_cpu = problem.device.type == "cpu"
        self._length_tensors = [torch.tensor([length]) for length in range(problem.max_length + 1)]  # (1,) each
        self._finished_tensors = (torch.tensor([False]), torch.tensor([True]))  # (1,) each

    @property
    def nodes(self) -> int:
        """Number of prefixes memoised now, the round starts included."""
        return self._nodes

    def __len__(self) -> int:
        """Number of queries memoised now."""
        return len(self._starts)

    def observed_embeddings(self, query: int, node: QueryStart) -> np.ndarray | None:
        """``(n, d)`` float32 candidates of the unfinished ``node`` for an observation (a new array), or None.

        Args:
            query: the round's query (unused: the node holds its candidates).
            node: the current prefix.
        """
        return None if node.host_embeddings is None else node.host_embeddings.copy()

    def get(self, query: int) -> QueryStart:
        """The round start of ``query`` (an index into the pool)."""
        start = self._starts.get(query)
        if start is None:
            start = self.compute(query)
            if len(self._starts) >= self.capacity:
                oldest = next(iter(self._starts))
                del self._starts[oldest]
                self._nodes -= 1 + self._prefix_counts.pop(oldest)
            self._starts[query] = start
            self._prefix_counts[query] = 0
            self._nodes += 1
        return start

    def child(self, query: int, node: QueryStart, token: int, token_tensor: torch.Tensor) -> QueryStart:
        """The node of ``x:y:token`` below ``node`` (``x:y``, unfinished, shorter than L), memoised if room is left.

        Args:
            query: the round's query (``node`` lies below its start).
            node: the current prefix.
            token: the token appended (an allowed action).
            token_tensor: ``(1,)`` int64 ``token`` on the problem's device.
        """
        known = node.children.get(token)
        if known is not None:
            return known
        problem = self.problem
        carries = node.candidate_carries
        if carries is None:  # TMAB observes no candidates; a table row of all n is still the cheapest
            carries = problem.candidate_carries(node.state)  # (1, n, *c)
        finished = token == problem.eos_token_id
        if self._on_cpu:
            tokens = node.state.tokens.numpy().copy()  # (1, L) padded with EOS
            tokens[0, node.length] = token
            state = DecodingState(
                queries=node.state.queries,
                tokens=torch.from_numpy(tokens),
                lengths=self._length_tensors[node.length + 1],
                finished=self._finished_tensors[finished],
                carry=torch.from_numpy(carries.numpy()[:, token]),  # (1, *c) a view, as carries[:, token], no dispatch
                last_tokens=token_tensor,
            )
        else:
            state = problem.extend(node.state, token_tensor, carries[:, token])
        if finished or not self.with_candidates:
            fresh = QueryStart(state, None, None, node.length + 1)
        else:
            fresh = self._with_candidates(query, state, node.length + 1)
        if self._nodes < self.capacity and query in self._starts:
            node.children[token] = fresh
            self._prefix_counts[query] += 1
            self._nodes += 1
        return fresh

    def round_end(self, node: QueryStart, query: int, response: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The complete response's utility and float32 embedding ``(d,)`` (None without features).

        Args:
            node: the complete response's node.
            query: the round's query (its state holds it too).
            response: ``(L,)`` its tokens, padded with EOS (its state holds them too).
        """
        problem = self.problem
        embedding = None
        if isinstance(problem, LinearTokenizedProblem):
            embedding = problem.embedding_of(node.state).to(torch.float32).cpu().numpy()[0].copy()  # (d,)
        return float(problem.utility_of_complete(node.state)), embedding  # (1,) -> its value

    def compute(self, query: int) -> QueryStart:
        """The round start of ``query``, computed afresh by the core (no memo)."""
        check_int("query", query, minimum=0)
        if query >= self.problem.num_queries:
            raise ValueError(f"query must lie in [0, {self.problem.num_queries}), got {query}")
        problem = self.problem
        state = problem.initial_state(torch.full((1,), query, dtype=torch.int64, device=problem.device))
        if not self.with_candidates:
            return QueryStart(state, None, None)
        return self._with_candidates(query, state, 0)

    def _with_candidates(self, query: int, state: DecodingState, length: int) -> QueryStart:
        """The node of ``state`` (``|y| = length``) with its candidates' carries (and embeddings, for TLB families)."""
        problem = self.problem
        if not isinstance(problem, LinearTokenizedProblem):
            return QueryStart(state, problem.candidate_carries(state), None, length)  # (1, n, *c)
        host_carries = problem.host_candidate_carries(query, length, state.carry.numpy()[0]) if self._on_cpu else None
        if host_carries is None:
            carries = problem.candidate_carries(state)  # (1, n, *c)
        else:  # the family's NumPy way on the CPU: the same values, without a dozen torch dispatches
            carries = torch.from_numpy(host_carries[None])  # (1, n, *c)
        embeddings = problem.candidate_embeddings(state, carries)  # (1, n, d)
        if self._on_cpu:  # float64 -> float32 rounds to nearest in NumPy as in torch; NumPy's cast is cheaper
            host = embeddings.numpy()[0].astype(np.float32)  # (n, d)
            return QueryStart(state, carries, torch.from_numpy(host), length, host)
        embeddings = embeddings[0].to(torch.float32, copy=True)
        return QueryStart(state, carries, embeddings, length, embeddings.cpu().numpy())


@dataclass(eq=False, slots=True)
class TablePrefix:
    """One prefix ``x:y`` of a family with a carry table (:class:`TablePrefixMemo`): a node of its trie.

    Read its arrays, never write into them: every round through this prefix shares them.

    Attributes:
        carry: ``(*c,)`` the family's carry of ``x:y`` (``e(x, y)`` for the discounted family).
        host_embeddings: ``(n, d)`` float32 ``e(x, y:tau)`` of every candidate once the prefix
            was observed twice (:meth:`TablePrefixMemo.observed_embeddings`), else None.
        length: ``|y|``.
        children: token -> the node of ``x:y:token``, filled as tokens are played.
        round_end: the complete response's utility and float32 embedding ``(d,)`` (None for a
            family without features), as the env reports them; set by the env on first use.
        observed: whether the prefix's candidates were observed once (and not kept).
    """

    carry: np.ndarray
    host_embeddings: np.ndarray | None = None
    length: int = 0
    children: dict[int, TablePrefix] = field(default_factory=dict, repr=False)
    round_end: tuple[float, np.ndarray | None] | None = field(default=None, repr=False)
    observed: bool = field(default=False, repr=False)


class TablePrefixMemo:
    """:class:`QueryStartMemo`'s interface for a family whose carry recursion is a table, in NumPy.

    With ``(alpha, rows) = problem.host_carry_rows()``, the carry of ``x:y:tau`` is
    ``alpha * carry + rows[x * (L + 1) + |y|, tau]`` and the candidates' embeddings at ``x:y``
    are ``rows[x * (L + 1) + |y|] + alpha * carry`` rounded to float32: the core's float
    operations (a product, then a sum), so every value is the core's bit for bit. A node holds
    its ``(*c,)`` carry and ``(n, d)`` float32 candidates only, so the memo holds more prefixes
    than :class:`QueryStartMemo` in the same bytes; when it is full, new prefixes are computed
    the same way and not kept (no query is dropped: a miss costs one table row). A node keeps
    its candidates from its second observation on: the first computes them into the array the
    observation hands out (no copy, no memory kept, as for most prefixes a learner explores once).

    Args:
        problem: the instance (on the CPU, with a carry table).
        with_candidates: also compute the candidates' float32 embeddings (families with features).

    Raises:
        ValueError: the problem has no carry table (:meth:`TokenizedProblem.host_carry_rows` is None).
    """

    def __init__(self, problem: TokenizedProblem, with_candidates: bool) -> None:
        carry_rows = problem.host_carry_rows()
        if carry_rows is None:
            raise ValueError(f"{type(problem).__name__} has no carry table on {problem.device}: use QueryStartMemo")
        self.problem = problem
        self.with_candidates = with_candidates
        self._alpha, self._rows = carry_rows  # rows: (Q * (L + 1), n, *c)
        self._stride = problem.max_length + 1
        self._embeddings = isinstance(problem, LinearTokenizedProblem)  # whether the carry is e(x, y)
        self._zero = np.zeros(self._rows.shape[2:], dtype=self._rows.dtype)  # (*c,) every round's first carry
        self._zero.flags.writeable = False
        candidate_bytes = self._rows[0].size * 4 if with_candidates else 0  # (n, d) float32
        self.capacity = max(1, memo_byte_budget() // (NODE_OVERHEAD_BYTES + self._zero.nbytes + candidate_bytes))
        self._starts: dict[int, TablePrefix] = {}
        self._nodes = 0
        # The round-end state's memory, written by round_end(): (query, |y|, last token), the tokens, the carry
        self._end_index = np.zeros(3, dtype=np.int64)  # (3,)
        self._end_tokens = np.zeros((1, problem.max_length), dtype=np.int64)  # (1, L)
        self._end_carry = np.zeros((1, *self._zero.shape), dtype=self._zero.dtype)  # (1, *c)
        self._end_state: DecodingState | None = None  # its tensors view the arrays above (made on first use)

    def __getstate__(self) -> dict[str, object]:
        """The state to copy or pickle, without the round-end state (a copy's tensors must view its own arrays)."""
        return {**self.__dict__, "_end_state": None}

    @property
    def nodes(self) -> int:
        """Number of prefixes memoised now, the round starts included."""
        return self._nodes

    def __len__(self) -> int:
        """Number of queries memoised now."""
        return len(self._starts)

    def get(self, query: int) -> TablePrefix:
        """The round start of ``query`` (an index into the pool)."""
        start = self._starts.get(query)
        if start is None:
            start = self.compute(query)
            if self._nodes < self.capacity:
                self._starts[query] = start
                self._nodes += 1
        return start

    def compute(self, query: int) -> TablePrefix:
        """The round start of ``query``, computed afresh (no memo)."""
        check_int("query", query, minimum=0)
        if query >= self.problem.num_queries:
            raise ValueError(f"query must lie in [0, {self.problem.num_queries}), got {query}")
        return TablePrefix(self._zero)

    def child(self, query: int, node: TablePrefix, token: int, token_tensor: torch.Tensor | None = None) -> TablePrefix:
        """The node of ``x:y:token`` below ``node`` (``x:y``, unfinished, shorter than L), memoised if room is left.

        Args:
            query: the round's query (``node`` lies below its start).
            node: the current prefix.
            token: the token appended (an allowed action).
            token_tensor: unused (:class:`QueryStartMemo`'s signature).
        """
        known = node.children.get(token)
        if known is not None:
            return known
        carry = self._alpha * node.carry + self._rows[query * self._stride + node.length, token]  # (*c,)
        carry.flags.writeable = False
        fresh = TablePrefix(carry, length=node.length + 1)
        if self._nodes < self.capacity:
            node.children[token] = fresh
            self._nodes += 1
        return fresh

    def round_end(self, node: TablePrefix, query: int, response: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The complete response's utility (one core call) and float32 embedding ``(d,)`` (None without features).

        Args:
            node: the complete response's node.
            query: the round's query.
            response: ``(L,)`` its tokens, padded with EOS.
        """
        length = node.length
        state = self._round_end_state()
        self._end_index[0], self._end_index[1], self._end_index[2] = query, length, response[length - 1]
        self._end_tokens[0] = response
        self._end_carry[0] = node.carry
        embedding = node.carry.astype(np.float32) if self._embeddings else None  # (d,) the carry is e(x, y)
        return float(self.problem.utility_of_complete(state)), embedding

    def _round_end_state(self) -> DecodingState:
        """A complete response's state, its tensors viewing the arrays :meth:`round_end` writes (none made per call)."""
        if self._end_state is None:
            index = torch.from_numpy(self._end_index)  # (3,) query, |y|, last token
            self._end_state = DecodingState(
                queries=index[0:1],
                tokens=torch.from_numpy(self._end_tokens),
                lengths=index[1:2],
                finished=torch.ones(1, dtype=torch.bool),
                carry=torch.from_numpy(self._end_carry),
                last_tokens=index[2:3],
            )
        return self._end_state

    def observed_embeddings(self, query: int, node: TablePrefix) -> np.ndarray | None:
        """``(n, d)`` float32 candidates of the unfinished ``node`` for an observation (a new array), or None.

        The first observation computes them into the array it returns; the second keeps a read-only
        copy in the node (when it is memoised), which later observations copy.

        Args:
            query: the round's query (``node`` lies below its start).
            node: the current prefix (unfinished).
        """
        if not self.with_candidates:
            return None
        if node.host_embeddings is not None:
            return node.host_embeddings.copy()
        embeddings = np.empty(self._rows.shape[1:], dtype=np.float32)  # (n, d)
        np.add(self._rows[query * self._stride + node.length], self._alpha * node.carry, out=embeddings)  # rounded
        if node.observed:
            node.host_embeddings = embeddings.copy()
            node.host_embeddings.flags.writeable = False
        node.observed = True
        return embeddings


def prefix_memo(problem: TokenizedProblem, with_candidates: bool) -> QueryStartMemo | TablePrefixMemo:
    """The prefix memo of a batch-of-one env.

    :class:`TablePrefixMemo` where the family has a carry table on the CPU, else :class:`QueryStartMemo`.
    """
    if problem.host_carry_rows() is not None:
        return TablePrefixMemo(problem, with_candidates)
    return QueryStartMemo(problem, with_candidates)
