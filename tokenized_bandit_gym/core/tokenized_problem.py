"""A tokenized bandit problem instance: batched decoding dynamics, utilities and exact optima.

Paper section 2: a response ``y`` is built token by token from the vocabulary ``V`` (size n,
one EOS id) and is complete once it ends with EOS; its length is at most ``L``. Every family
subclasses :class:`TokenizedProblem` and only says how a *carry* (a running summary of ``x:y``)
is extended by one token and what utility a carry has. Everything else, the action mask, the
step, the batched embedding oracle, the oracle greedy decode and the exact optimum, is written
once here, on batches of B rounds, so the single env (B = 1) and the vector env share it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np
import torch

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.enumeration import complete_responses
from tokenized_bandit_gym.core.validation import check_int, check_replay


@dataclass(frozen=True)
class DecodedResponses:
    """Responses of a batch of rounds and their noise-free utilities.

    Attributes:
        utility: ``(B,)`` u(x, y) of each response.
        responses: ``(B, L)`` int64 token ids, complete (ending with EOS), padded with EOS.
    """

    utility: torch.Tensor
    responses: torch.Tensor


StateT = TypeVar("StateT")


@runtime_checkable
class TokenizedBanditProblem(Protocol[StateT]):
    """What every tokenized bandit instance offers the env shells, the agents and the evaluation.

    Implemented by the synthetic families (:class:`TokenizedProblem`, state
    :class:`DecodingState`) and by the LLM problem
    (:class:`~tokenized_bandit_gym.llm.language_model_problem.LanguageModelProblem`, its own
    KV-cached state). ``k`` is the number of candidates per step (``n`` for synthetic problems,
    the LM's top-k otherwise); an action is an index into them.

    Attributes:
        vocab_size: n, the number of token ids, EOS included.
        max_length: L.
        eos_token_id: the EOS token id.
        query_tokens: ``(Q, Lq)`` int64 token ids of the query pool, padded with EOS.
        query_lengths: ``(Q,)`` int64 length of each query.
        device: where the instance's tensors live.
    """

    vocab_size: int
    max_length: int
    eos_token_id: int
    query_tokens: torch.Tensor
    query_lengths: torch.Tensor
    device: torch.device

    @property
    def num_queries(self) -> int:
        """Q, the size of the query pool."""
        ...

    @property
    def embedding_dim(self) -> int | None:
        """d, the dimension of the features agents observe, or None without features."""
        ...

    def initial_state(self, queries: torch.Tensor, /) -> StateT:
        """Empty responses for ``queries`` ``(B,)`` int64."""
        ...

    def action_mask(self, state: StateT, /) -> torch.Tensor:
        """Allowed actions ``(B, k)`` bool (only EOS at position L and once complete)."""
        ...

    def advance(self, state: StateT, actions: torch.Tensor, active: torch.Tensor | None = None, /) -> StateT:
        """Append the chosen candidates ``(B,)`` to the ``active`` ``(B,)`` unfinished rows."""
        ...

    def utility_of(self, state: StateT, /) -> torch.Tensor:
        """Noise-free utility ``(B,)`` of the responses in ``state``."""
        ...

    def candidate_utilities(self, state: StateT, /) -> torch.Tensor:
        """``u(x, y:tau)`` ``(B, k)`` for every candidate tau (the oracle greedy's scores)."""
        ...

    def utility(
        self, queries: torch.Tensor, responses: torch.Tensor, lengths: torch.Tensor | None = None, /
    ) -> torch.Tensor:
        """Noise-free utilities ``(B,)`` of arbitrary token-id responses ``(B, T)``."""
        ...

    def greedy_decode(self, queries: torch.Tensor, /) -> DecodedResponses:
        """Greedy decoding with the true utility for ``queries`` ``(B,)``."""
        ...

    def oracle_greedy(self, queries: torch.Tensor, /) -> DecodedResponses:
        """:meth:`greedy_decode` of the pool, computed once (the paper's plotted benchmark)."""
        ...


def replayed(
    state: StateT,
    responses: torch.Tensor,
    lengths: torch.Tensor | None,
    append: Callable[[StateT, torch.Tensor, torch.Tensor | None], StateT],
) -> StateT:
    """``state`` with the token ids ``responses`` ``(B, T)`` appended column by column by ``append``.

    Row i takes its first ``lengths[i]`` tokens (all T when ``lengths`` is None): ``append(state, tokens, active)``
    gets the column's tokens ``(B,)`` and the rows still reading, ``(B,)`` bool, or None for every row.
    """
    for position in range(responses.shape[1]):
        active = None if lengths is None else torch.as_tensor(lengths, device=responses.device) > position
        state = append(state, responses[:, position], active)
    return state


class TokenizedProblem(ABC):
    """Base class of every problem instance (TLB, TMAB and their families).

    Subclasses implement :meth:`initial_carry`, :meth:`append` and :meth:`utility_of_states`
    (and may override :meth:`_exact_optimum` with a dynamic program). Monotonicity (paper
    Assumption 1) holds for every family by construction: tokens after the first EOS are
    ignored, so the utility of a complete response never changes.

    Args:
        vocab_size: n, the number of token ids, EOS included (>= 2).
        max_length: L, the most tokens a response may have, EOS included (>= 1).
        eos_token_id: the EOS id in ``[0, n)``.
        query_tokens: ``(Q, Lq)`` int64 token ids of the query pool, padded with EOS.
        query_lengths: ``(Q,)`` int64 length of each query.
        fixed_length: if True, EOS is allowed only at position L (every response has length L).
        device: where every tensor of the instance lives.
    """

    def __init__(
        self,
        vocab_size: int,
        max_length: int,
        eos_token_id: int,
        query_tokens: torch.Tensor,
        query_lengths: torch.Tensor,
        fixed_length: bool,
        device: torch.device,
    ) -> None:
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=2)
        self.max_length = check_int("max_length", max_length, minimum=1)
        self.eos_token_id = check_int("eos_token_id", eos_token_id, minimum=0)
        if self.eos_token_id >= self.vocab_size:
            raise ValueError(f"eos_token_id must be < vocab_size={vocab_size}, got {eos_token_id}")
        if not isinstance(fixed_length, bool):
            raise TypeError(f"fixed_length must be a bool, got {fixed_length!r}")
        self.fixed_length = fixed_length
        self.device = device
        self.query_tokens = query_tokens.to(device)  # (Q, Lq)
        self.query_lengths = query_lengths.to(device)  # (Q,)
        pool = torch.arange(self.query_tokens.shape[0], device=device)  # (Q,)
        # Last token of each query (the first column for an empty one), read by initial_state.
        self.query_last_tokens = self.query_tokens[pool, (self.query_lengths - 1).clamp(min=0)]  # (Q,)
        self.vocabulary = torch.arange(self.vocab_size, device=device)  # (n,) every token id
        self._optimum: DecodedResponses | None = None
        self._greedy: DecodedResponses | None = None

    # ------------------------------------------------------------------ family interface
    @abstractmethod
    def initial_carry(self, queries: torch.Tensor) -> torch.Tensor:
        """Carry of ``x:empty`` for ``queries`` ``(B,)``; returns ``(B, *c)``."""

    @abstractmethod
    def append(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        """Carries of ``x:y:tau`` for m candidate tokens per round.

        Args:
            queries: ``(B,)`` query indices.
            carry: ``(B, *c)`` carry of ``x:y``.
            last_tokens: ``(B,)`` last token of ``x:y``.
            tokens: ``(B, m)`` candidate tokens tau.
            positions: ``(B,)`` 1-based position of tau in the response (``|y| + 1``); may
                exceed L for masked candidates, which families clamp.

        Returns:
            ``(B, m, *c)`` carries.
        """

    def append_every_token(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        last_tokens: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """:meth:`append` with every token of the vocabulary as the candidates, ``(B, n, *c)``.

        Equal, element for element, to ``append(queries, carry, last_tokens, tokens, lengths + 1)``
        with ``tokens = vocabulary.expand(B, -1)``; families override it where all n candidates
        cost fewer operations at once (a table row instead of a gather).

        Args:
            queries: ``(B,)`` query indices.
            carry: ``(B, *c)`` carry of ``x:y``.
            last_tokens: ``(B,)`` last token of ``x:y``.
            lengths: ``(B,)`` ``|y|`` (the candidates take position ``|y| + 1``).
        """
        tokens = self.vocabulary.expand(queries.shape[0], -1)  # (B, n)
        return self.append(queries, carry, last_tokens, tokens, lengths + 1)

    @abstractmethod
    def utility_of_states(
        self,
        queries: torch.Tensor,
        carry: torch.Tensor,
        lengths: torch.Tensor,
        finished: torch.Tensor,
    ) -> torch.Tensor:
        """Noise-free utilities ``(N,)`` of N sequences.

        Args:
            queries: ``(N,)`` query indices.
            carry: ``(N, *c)`` carries.
            lengths: ``(N,)`` response lengths.
            finished: ``(N,)`` whether each response is complete.
        """

    @property
    def embedding_dim(self) -> int | None:
        """d, the dimension of ``e(x, y)``; None for families without features (TMAB)."""
        return None

    @property
    def num_queries(self) -> int:
        """Q, the size of the query pool."""
        return int(self.query_tokens.shape[0])

    @property
    def ddmc(self) -> bool:
        """Whether the family satisfies DDMC exactly (same-length pairs, no interior EOS)."""
        return False

    # ------------------------------------------------------------------ dynamics
    def initial_state(self, queries: torch.Tensor) -> DecodingState:
        """Empty responses for ``queries`` ``(B,)`` int64."""
        queries = queries.to(self.device, torch.int64)
        batch = queries.shape[0]
        return DecodingState(
            queries=queries,
            tokens=torch.full((batch, self.max_length), self.eos_token_id, dtype=torch.int64, device=self.device),
            lengths=torch.zeros(batch, dtype=torch.int64, device=self.device),
            finished=torch.zeros(batch, dtype=torch.bool, device=self.device),
            carry=self.initial_carry(queries),
            last_tokens=self.query_last_tokens[queries],
        )

    def action_mask(self, state: DecodingState) -> torch.Tensor:
        """Allowed next tokens, ``(B, n)`` bool.

        At position L only EOS is allowed; with ``fixed_length`` EOS is allowed only there.
        A finished response allows only EOS (appending EOS to a complete response changes
        nothing, paper Assumption 1).
        """
        is_eos = torch.arange(self.vocab_size, device=self.device) == self.eos_token_id  # (n,)
        only_eos = (state.finished | (state.lengths >= self.max_length - 1))[:, None]  # (B, 1)
        otherwise = ~is_eos if self.fixed_length else torch.ones_like(is_eos)  # (n,)
        return torch.where(only_eos, is_eos, otherwise)  # (B, n)

    def candidate_carries(self, state: DecodingState) -> torch.Tensor:
        """Carries of ``x:y:tau`` for every token tau, ``(B, n, *c)``."""
        return self.append_every_token(state.queries, state.carry, state.last_tokens, state.lengths)

    def candidate_utilities(self, state: DecodingState) -> torch.Tensor:
        """``u(x, y:tau)`` for every token tau, ``(B, n)`` (masked entries included)."""
        carries = self.candidate_carries(state)  # (B, n, *c)
        batch, n = carries.shape[:2]
        tokens = torch.arange(n, device=self.device).expand(batch, -1)  # (B, n)
        utilities = self.utility_of_states(
            state.queries.repeat_interleave(n),
            carries.reshape(batch * n, *carries.shape[2:]),
            (state.lengths + 1).repeat_interleave(n),
            (tokens == self.eos_token_id).reshape(-1),
        )
        return utilities.view(batch, n)

    def extend(self, state: DecodingState, tokens: torch.Tensor, carry: torch.Tensor | None = None) -> DecodingState:
        """Append ``tokens`` ``(B,)`` int64 (on the device) to every row of ``state``, as they are.

        No mask, no forced EOS and no row selection: every row must be unfinished and hold fewer
        than L tokens (:meth:`advance` sees to it for a whole batch; a batch-of-one env knows it
        on the host). A row holding L tokens has no column left for the token (an index error).

        Args:
            state: the current state.
            tokens: ``(B,)`` int64 token per row.
            carry: ``(B, *c)`` carries of ``x:y:tokens`` when already known (a row of
                :meth:`candidate_carries`); computed with :meth:`append` otherwise.

        Returns:
            The new state (a new object; ``state`` is unchanged).
        """
        positions = state.lengths + 1  # (B,) 1-based position of the new token
        if carry is None:
            carry = self.append(state.queries, state.carry, state.last_tokens, tokens.unsqueeze(1), positions)[:, 0]
        return DecodingState(
            queries=state.queries,
            tokens=state.tokens.scatter(1, state.lengths.unsqueeze(1), tokens.unsqueeze(1)),
            lengths=positions,
            finished=tokens == self.eos_token_id,
            carry=carry,
            last_tokens=tokens,
        )

    def advance(
        self,
        state: DecodingState,
        tokens: torch.Tensor,
        active: torch.Tensor | None = None,
        candidate_carries: torch.Tensor | None = None,
    ) -> DecodingState:
        """Append ``tokens`` ``(B,)`` to the rows of ``state`` that are active and unfinished.

        The token of a row at position L is EOS whatever ``tokens`` says (only EOS is allowed
        there), so every row that reaches L tokens is complete. This is :meth:`extend` on the
        forced tokens, kept on the rows that may grow.

        Args:
            state: the current state.
            tokens: ``(B,)`` int64 token per row.
            active: ``(B,)`` bool rows to extend (default: all); rows that are finished or
                already hold L tokens are never extended.
            candidate_carries: ``(B, n, *c)`` from :meth:`candidate_carries` on this state,
                to reuse instead of recomputing the chosen token's carry.

        Returns:
            The new state (a new object; ``state`` is unchanged).
        """
        if tokens.dtype != torch.int64 or tokens.device != self.device:
            tokens = tokens.to(self.device, torch.int64)
        # Position L admits only EOS: a row reaching it always ends (the env's forced EOS), so no
        # row can hold L tokens without being complete.
        tokens = torch.where(state.lengths >= self.max_length - 1, self.eos_token_id, tokens)  # (B,)
        grow = ~state.finished & (state.lengths < self.max_length)  # (B,)
        if active is not None:
            grow = grow & active
        new_carry = None
        if candidate_carries is not None:
            index = tokens.view(-1, 1, *([1] * (candidate_carries.dim() - 2)))
            index = index.expand(-1, 1, *candidate_carries.shape[2:])
            new_carry = candidate_carries.gather(1, index)[:, 0]  # (B, *c)
        # Rows that do not grow may hold L tokens; extend them at column L - 1 and drop the result.
        in_range = replace(state, lengths=state.lengths.clamp(max=self.max_length - 1))
        return state.with_rows(grow, self.extend(in_range, tokens, new_carry))

    def utility_of(self, state: DecodingState) -> torch.Tensor:
        """Noise-free utility ``(B,)`` of the responses held in ``state``."""
        return self.utility_of_states(state.queries, state.carry, state.lengths, state.finished)

    def host_carry_rows(self) -> tuple[float, np.ndarray] | None:
        """The carry recursion as one NumPy table, for the N-row host batch, where the family has one; else None.

        A family that gives ``(alpha, rows)`` has carries ``(d,)`` that start at zero and are the
        embedding ``e(x, y)`` itself where the family has features; the carry of ``x:y:tau`` is
        ``alpha * carry + rows[x * (L + 1) + |y|, tau]``, with ``rows`` ``(Q * (L + 1), n, d)``
        of the carries' dtype (read only): the float operations of :meth:`candidate_carries`,
        so the values are equal bit for bit.
        """
        return None

    def utility_of_complete(self, state: DecodingState) -> torch.Tensor:
        """:meth:`utility_of` for a ``state`` whose every response is complete, ``(B,)``.

        Equal to :meth:`utility_of` on such a state; families whose utility of an incomplete
        response does extra work (TMAB's stop value) skip it here.
        """
        return self.utility_of(state)

    # ------------------------------------------------------------------ oracle access
    def state_for(
        self,
        queries: torch.Tensor,
        responses: torch.Tensor,
        lengths: torch.Tensor | None = None,
    ) -> DecodingState:
        """Replay ``responses`` for ``queries`` and return the resulting state.

        Args:
            queries: ``(B,)`` query indices.
            responses: ``(B, T)`` token ids with ``T <= L``; tokens after the first EOS and at
                or past ``lengths`` are ignored.
            lengths: ``(B,)`` number of tokens to read per row (default: all T).
        """
        queries = torch.as_tensor(queries, device=self.device, dtype=torch.int64)
        responses = torch.as_tensor(responses, device=self.device, dtype=torch.int64)
        check_replay(queries, responses, self.max_length, self.num_queries, self.vocab_size)
        return replayed(self.initial_state(queries), responses, lengths, self.advance)

    def utility(
        self,
        queries: torch.Tensor,
        responses: torch.Tensor,
        lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Noise-free utilities ``(B,)`` of arbitrary responses ``(B, T)`` (see :meth:`state_for`)."""
        return self.utility_of(self.state_for(queries, responses, lengths))

    # ------------------------------------------------------------------ benchmarks
    def optimal(self, queries: torch.Tensor) -> DecodedResponses:
        """The exact optimum (utility ``(B,)`` and response ``(B, L)``) for ``queries`` ``(B,)``.

        Computed once for the whole query pool, by the family's dynamic program or by
        enumeration (never sampled); the utility is that of the optimal response replayed.
        """
        if self._optimum is None:
            pool = torch.arange(self.num_queries, device=self.device)
            exact = self._exact_optimum(pool)
            # Replay the optimal responses so their utility is computed exactly as an agent's
            # response is (regret of the optimal response is then exactly 0, not 1e-17).
            self._optimum = DecodedResponses(self.utility(pool, exact.responses), exact.responses)
        queries = queries.to(self.device, torch.int64)
        return DecodedResponses(self._optimum.utility[queries], self._optimum.responses[queries])

    def oracle_greedy(self, queries: torch.Tensor) -> DecodedResponses:
        """Greedy decoding with the true utility (the paper's "Optimal greedy" benchmark).

        At each position the allowed token with the highest ``u(x, y:tau)`` is chosen (ties go to
        the lowest id). By Theorem 5.1 this is optimal on exact-DDMC families when
        ``fixed_length`` is set; with early EOS allowed it can stop too early.
        """
        if self._greedy is None:
            self._greedy = self.greedy_decode(torch.arange(self.num_queries, device=self.device))
        queries = queries.to(self.device, torch.int64)
        return DecodedResponses(self._greedy.utility[queries], self._greedy.responses[queries])

    def greedy_decode(self, queries: torch.Tensor) -> DecodedResponses:
        """Run greedy decoding with the true utility for ``queries`` ``(B,)`` (no caching)."""
        state = self.initial_state(queries)
        for _ in range(self.max_length):
            state = self.advance(state, self._greedy_tokens(state))
        return DecodedResponses(self.utility_of(state), state.tokens)

    def _greedy_tokens(self, state: DecodingState) -> torch.Tensor:
        """The allowed token of highest :meth:`candidate_utilities` per row, ``(B,)`` (lowest id on ties).

        A row with no allowed token gets token 0 (every score is ``-inf``).
        """
        scores = self.candidate_utilities(state).masked_fill(~self.action_mask(state), float("-inf"))  # (B, n)
        return scores.argmax(dim=1)

    def enumerated_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """The exact optimum by brute-force enumeration of every complete response.

        Costs ``B * S`` utility evaluations, S = ``sum_m (n-1)^(m-1)``; raises ``ValueError``
        when S is too large. Tests use it to check the families' dynamic programs.
        """
        candidates = complete_responses(
            self.vocab_size, self.max_length, self.eos_token_id, self.fixed_length, self.device
        )  # (S, L)
        queries = queries.to(self.device, torch.int64)
        count = candidates.shape[0]
        best_utility = []
        best_response = []
        for query in queries.tolist():
            query_batch = torch.full((count,), query, dtype=torch.int64, device=self.device)
            values = self.utility(query_batch, candidates)  # (S,)
            index = int(values.argmax())
            best_utility.append(values[index])
            best_response.append(candidates[index])
        return DecodedResponses(torch.stack(best_utility), torch.stack(best_response))

    def _exact_optimum(self, queries: torch.Tensor) -> DecodedResponses:
        """Exact optimum for ``queries``; families with structure override this with a DP."""
        return self.enumerated_optimum(queries)

    def _position_index(self, positions: torch.Tensor) -> torch.Tensor:
        """0-based position rows for 1-based ``positions``, clamped into ``[0, L)``."""
        return (positions - 1).clamp(min=0, max=self.max_length - 1)
