"""The host batch's step where the family's carry is a table, compiled (Numba): one pass per row.

Where the carry recursion of a family is a table (:meth:`TokenizedProblem.host_carry_rows
<tokenized_bandit_gym.core.tokenized_problem.TokenizedProblem.host_carry_rows>`: the discounted
TLB and the TMAB over it), a step of N rounds is a few loops over the rows: check the actions
(the env contract's forced-EOS rule), append the tokens (``carry <- alpha * carry + (c *
phi)[x, |y|, tau]``), summarise the ended rounds, restart rows, observe. As NumPy calls that is
about 175 calls of 0.3-1 us at N = 64 and three passes over the observation's rows; here it is
two compiled calls that write every output once (``benchmarks/vector_env_fixed_cost.py``).

Bit for bit the core's float operations: ``alpha * carry`` then ``+ row`` in the carry's dtype
(``alpha`` is passed in that dtype), the observed embedding rounded once to float32 from the
instance's dtype, the regret ``optimal - utility`` in float64. Numba compiles without
``fastmath``, so LLVM contracts no multiply-add into an FMA (a test holds every kernel equal to
the core's torch path). The utility is not computed here: it is the core's torch sum, whose
order of additions NumPy and a loop do not reproduce; the caller passes it in.

The kernels take the batch's state and the instance's tables as two tuples (:data:`STATE` and
:data:`TABLES` name their entries, :meth:`HostRoundBatch.kernel_state
<tokenized_bandit_gym.envs.round_batch.HostRoundBatch.kernel_state>` and ``kernel_tables`` build
them). Every output is a new array; entries of one dtype and shape share one new buffer (``(K, N)``,
one entry a row), so no output shares memory with another (the rows are disjoint) or with the
batch's state. The kernels are compiled on first use and cached beside this module
(``cache=True``).

The layout of the returned buffers (row ``i`` of each):

* :data:`FLAG_ROWS` ``(4 + K, N)`` bool: ``forced_eos``, ``terminated``, ``round_ended``,
  ``truncated``, then the K ``_key`` masks of the infos (all True);
* :data:`VALUE_ROWS` ``(6, N)`` float64: ``utility``, ``optimal_utility``, ``regret``,
  ``oracle_greedy_utility``, ``noise``, the reward;
* :data:`INT_ROWS` ``(4, N)`` int64: ``query_index``, ``response_length``, the observation's
  ``length`` and ``query_length``;
* :data:`TOKEN_ROWS` ``(3, N, L)`` int64: ``response``, ``optimal_response`` (fills -1 off the
  ended rows), the observation's ``response``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np

from tokenized_bandit_gym.envs.env_contract import ROUND_VALUE_KEYS

FLAG_ROWS = ("forced_eos", "terminated", "round_ended", "truncated")
"""The first rows of the flags buffer; the ``_key`` masks follow."""
VALUE_ROWS = (*ROUND_VALUE_KEYS, "reward")
INT_ROWS = ("query_index", "response_length", "length", "query_length")
TOKEN_ROWS = ("response", "optimal_response", "observed_response")
STATE = ("queries", "lengths", "finished", "last_tokens", "noise", "response_tokens", "carry", "mask")
"""The state tuple: ``(N,)`` int64 queries, lengths and last tokens, ``(N,)`` bool finished,
``(N,)`` float64 noise, ``(N, L)`` int64 responses (EOS padded), ``(N, d)`` carries, ``(N, n)``
bool mask; the kernels update them in place."""
TABLES = (
    "carry_rows",
    "alpha",
    "eos",
    "query_last_tokens",
    "query_tokens",
    "query_lengths",
    "allowed",
    "allowed_int8",
    "benchmark_utilities",
    "optimal_responses",
)
"""The tables tuple (read only): ``(Q * (L + 1), n, d)`` the carry table ``c * phi`` and the
discount ``alpha`` (both in the carries' dtype), the EOS token id, ``(Q,)`` int64 each query's
last token, ``(Q, Lq)`` int64 the query pool and ``(Q,)`` its lengths, ``(L + 2, n)`` the mask
table by length as bool and int8 (row L + 1: complete), ``(2, Q)`` float64 the optimal and the
oracle greedy utilities, ``(Q, L)`` int64 the optimal responses."""

Kernel = TypeVar("Kernel", bound=Callable[..., Any])


def _compiled(function: Kernel) -> Kernel:
    """``function`` compiled by Numba (no fastmath: IEEE operations in the written order, no FMA).

    Cached on disk beside this module (or in the user's cache directory); where no cache can be
    written (a read-only install without a writable home), Numba refuses ``cache=True`` when the
    function is decorated, so the kernel is then compiled in each process instead.
    """
    try:
        dispatcher = numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        dispatcher = numba.njit(nogil=True)(function)
    return cast(Kernel, dispatcher)  # a Numba Dispatcher is called as the function it compiled


@_compiled
def check_actions(
    tokens: np.ndarray, stepping: np.ndarray, state: tuple, strict: bool, num_masks: int
) -> tuple[np.ndarray, bool]:
    """The env contract's action check on N rows; a new flags buffer with ``forced_eos`` written.

    :func:`~tokenized_bandit_gym.envs.env_contract.forced_and_refused`: a stepping row's masked
    action is forced to EOS at position L and refused before it (or anywhere when ``strict``);
    an action out of ``[0, n)`` is refused on every row.

    Args:
        tokens: ``(N,)`` int64 the actions.
        stepping: ``(N,)`` bool the rows that append a token.
        state: the batch's :data:`STATE` (read).
        strict: refuse a masked action at position L too.
        num_masks: K, the number of ``_key`` masks the flags buffer holds.

    Returns:
        ``(flags, invalid)``: the ``(4 + K, N)`` bool buffer (only its ``forced_eos`` row written)
        and whether some action is out of range or refused (then nothing may be advanced).
    """
    lengths, response_tokens, mask = state[1], state[5], state[7]
    max_length = response_tokens.shape[1]
    num_rows, num_actions = mask.shape
    flags = np.empty((4 + num_masks, num_rows), dtype=np.bool_)
    invalid = False
    for row in range(num_rows):
        token = tokens[row]
        if token < 0 or token >= num_actions:
            flags[0, row] = False
            invalid = True
            continue
        forced = stepping[row] and not mask[row, token]
        flags[0, row] = forced
        if forced and (strict or lengths[row] < max_length - 1):
            invalid = True
    return flags, invalid


@_compiled
def advance(
    tokens: np.ndarray,
    forced_eos: np.ndarray,
    stepping: np.ndarray,
    state: tuple,
    tables: tuple,
    terminated: np.ndarray,
) -> None:
    """Append each stepping row's token (EOS where forced) in place; ``terminated`` ``(N,)`` written.

    The chosen carry is ``carry * alpha + carry_rows[x * (L + 1) + |y|, tau]`` (the core's
    :meth:`append` on a carry table, the same float operations); a row that does not step is
    left as it is (it restarts in this step).

    Args:
        tokens: ``(N,)`` int64 the actions.
        forced_eos: ``(N,)`` bool the rows whose action becomes EOS.
        stepping: ``(N,)`` bool the rows that append a token.
        state: the batch's :data:`STATE`, updated in place.
        tables: the instance's :data:`TABLES`.
        terminated: ``(N,)`` bool out: the stepping rows whose response is now complete.
    """
    queries, lengths, finished, last_tokens, _, response_tokens, carry, _ = state
    carry_rows, alpha, eos = tables[0], tables[1], tables[2]
    num_rows, max_length = response_tokens.shape
    width = carry.shape[1]
    for row in range(num_rows):
        if not stepping[row]:
            terminated[row] = False
            continue
        token = eos if forced_eos[row] else tokens[row]
        column = min(lengths[row], max_length - 1)
        table_row = queries[row] * (max_length + 1) + column
        for index in range(width):
            carry[row, index] = carry[row, index] * alpha + carry_rows[table_row, token, index]
        lengths[row] = column + 1
        response_tokens[row, column] = token
        done = token == eos
        finished[row] = done
        last_tokens[row] = token
        terminated[row] = done


@_compiled
def restart(index: np.ndarray, new_queries: np.ndarray, new_noise: np.ndarray, state: tuple, tables: tuple) -> None:
    """Start new rounds on the rows ``index`` ``(R,)`` on ``new_queries`` with ``new_noise`` ``(R,)``, in place.

    The family's initial carry is zero, the response empty (EOS padding), the last token the query's.

    Args:
        index: ``(R,)`` int64 the rows (distinct).
        new_queries: ``(R,)`` int64 their queries.
        new_noise: ``(R,)`` float64 their reward noise.
        state: the batch's :data:`STATE`, written on the rows.
        tables: the instance's :data:`TABLES`.
    """
    queries, lengths, finished, last_tokens, noise, response_tokens, carry, _ = state
    eos, query_last_tokens = tables[2], tables[3]
    for position in range(index.shape[0]):
        row = index[position]
        query = new_queries[position]
        queries[row] = query
        lengths[row] = 0
        finished[row] = False
        last_tokens[row] = query_last_tokens[query]
        noise[row] = new_noise[position]
        response_tokens[row, :] = eos
        carry[row, :] = 0


@_compiled
def summarise(
    ended: np.ndarray, utility: np.ndarray, state: tuple, tables: tuple, token_rows: int, with_embedding: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The round summary of N rows (the schema's fills off the rows ``ended``), into new buffers.

    Args:
        ended: ``(N,)`` bool the rows whose round ended.
        utility: ``(N,)`` float64 the core's utility of every row (read on the ended rows; may be
            empty when none ended).
        state: the batch's :data:`STATE` (read; the carry is the response's embedding, rounded
            to float32).
        tables: the instance's :data:`TABLES`.
        token_rows: how many ``(N, L)`` rows the tokens buffer has (the observation's response
            may follow the two of the summary).
        with_embedding: whether the family reports ``response_embedding``.

    Returns:
        ``values`` ``(6, N)`` float64 (:data:`VALUE_ROWS`, the reward ``utility + noise`` on the
        ended rows), ``ints`` ``(4, N)`` int64 (:data:`INT_ROWS`, only ``response_length``
        written), ``tokens`` ``(token_rows, N, L)`` int64 (the first two rows written) and
        ``embedding`` ``(N, d)`` float32 (``(0, d)`` without one).
    """
    queries, lengths, _, _, noise, response_tokens, carry, _ = state
    benchmark_utilities, optimal_responses = tables[8], tables[9]
    num_rows, max_length = response_tokens.shape
    width = carry.shape[1]
    values = np.zeros((6, num_rows))
    ints = np.empty((4, num_rows), dtype=np.int64)
    tokens = np.empty((token_rows, num_rows, max_length), dtype=np.int64)
    embedding = np.zeros((num_rows if with_embedding else 0, width), dtype=np.float32)
    for row in range(num_rows):
        if not ended[row]:
            ints[1, row] = 0
            tokens[0, row, :] = -1
            tokens[1, row, :] = -1
            continue
        query = queries[row]
        value = utility[row]
        optimal = benchmark_utilities[0, query]
        values[0, row] = value
        values[1, row] = optimal
        values[2, row] = optimal - value
        values[3, row] = benchmark_utilities[1, query]
        values[4, row] = noise[row]
        values[5, row] = value + noise[row]
        ints[1, row] = lengths[row]
        tokens[0, row, :] = response_tokens[row, :]
        tokens[1, row, :] = optimal_responses[query, :]
        if with_embedding:
            for index in range(width):
                embedding[row, index] = np.float32(carry[row, index])
    return values, ints, tokens, embedding


@_compiled
def observe(
    state: tuple, tables: tuple, ints: np.ndarray, tokens: np.ndarray, with_embeddings: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The batch's observation into new arrays (and the ints' and tokens' observation rows); the mask rewritten.

    The candidates' embeddings are ``carry_rows[x * (L + 1) + |y|] + alpha * carry`` in the
    carries' dtype, rounded once to float32 (the core's
    :meth:`~tokenized_bandit_gym.core.discounted_problem.DiscountedProblem.observed_candidate_embeddings`),
    zeros once the response is complete.

    Args:
        state: the batch's :data:`STATE` (its mask rewritten in place).
        tables: the instance's :data:`TABLES`.
        ints: ``(4, N)`` int64: rows 0, 2 and 3 written (:data:`INT_ROWS`).
        tokens: ``(T, N, L)`` int64: its last row gets the responses.
        with_embeddings: whether the family observes candidate embeddings.

    Returns:
        ``query`` ``(N, Lq)`` int64, ``candidate_tokens`` ``(N, n)`` int64, ``action_mask``
        ``(N, n)`` int8 and ``candidate_embeddings`` ``(N, n, d)`` float32 (``(0, n, d)`` without).
    """
    queries, lengths, finished, _, _, response_tokens, carry, mask = state
    carry_rows, alpha, query_tokens, query_lengths = tables[0], tables[1], tables[4], tables[5]
    allowed, allowed_int8 = tables[6], tables[7]
    num_rows, max_length = response_tokens.shape
    num_actions = allowed.shape[1]
    width = carry.shape[1]
    query = np.empty((num_rows, query_tokens.shape[1]), dtype=np.int64)
    candidate_tokens = np.empty((num_rows, num_actions), dtype=np.int64)
    action_mask = np.empty((num_rows, num_actions), dtype=np.int8)
    embeddings = np.empty((num_rows if with_embeddings else 0, num_actions, width), dtype=np.float32)
    last = tokens.shape[0] - 1
    discounted = np.empty(width, dtype=carry.dtype)
    for row in range(num_rows):
        source = queries[row]
        length = lengths[row]
        ints[0, row] = source
        ints[2, row] = length
        ints[3, row] = query_lengths[source]
        query[row, :] = query_tokens[source, :]
        tokens[last, row, :] = response_tokens[row, :]
        mask_row = max_length + 1 if finished[row] else length
        for action in range(num_actions):
            candidate_tokens[row, action] = action
            mask[row, action] = allowed[mask_row, action]
            action_mask[row, action] = allowed_int8[mask_row, action]
        if not with_embeddings:
            continue
        if finished[row]:
            embeddings[row] = 0
            continue
        table_row = source * (max_length + 1) + length
        for index in range(width):
            discounted[index] = alpha * carry[row, index]
        for action in range(num_actions):
            for index in range(width):
                embeddings[row, action, index] = carry_rows[table_row, action, index] + discounted[index]
    return query, candidate_tokens, action_mask, embeddings


@_compiled
def begin_step(
    tokens: np.ndarray, stepping: np.ndarray, state: tuple, tables: tuple, strict: bool, num_masks: int
) -> tuple[np.ndarray, bool, int]:
    """:func:`check_actions`, then (every action valid) :func:`advance`: the first half of a vector step.

    Args:
        tokens: ``(N,)`` int64 the actions.
        stepping: ``(N,)`` bool the rows that append a token.
        state: the batch's :data:`STATE`, updated in place.
        tables: the instance's :data:`TABLES`.
        strict: refuse a masked action at position L too.
        num_masks: K, the infos' ``_key`` masks.

    Returns:
        ``(flags, invalid, ended)``: the flags buffer (``forced_eos`` and ``terminated``
        written), whether some action is invalid (then the state is untouched) and how many
        rounds ended.
    """
    flags, invalid = check_actions(tokens, stepping, state, strict, num_masks)
    if invalid:
        return flags, True, 0
    advance(tokens, flags[0], stepping, state, tables, flags[1])
    return flags, False, int(np.count_nonzero(flags[1]))


@_compiled
def end_step(
    flags: np.ndarray,
    utility: np.ndarray,
    restart_index: np.ndarray,
    new_queries: np.ndarray,
    new_noise: np.ndarray,
    autoreset: np.ndarray,
    state: tuple,
    tables: tuple,
    with_embeddings: bool,
) -> tuple[np.ndarray, ...]:
    """The second half of a vector step: :func:`summarise` the ended rows, :func:`restart` rows, :func:`observe`.

    The flags' ``round_ended`` row becomes ``terminated``, ``truncated`` False, the ``_key``
    masks True, and ``autoreset`` a copy of ``terminated``.

    Args:
        flags: :func:`begin_step`'s flags.
        utility: ``(N,)`` float64 the core's utility of every row (read on the ended rows).
        restart_index: ``(R,)`` the rows that start their next round.
        new_queries: ``(R,)`` int64 their queries.
        new_noise: ``(R,)`` float64 their reward noise.
        autoreset: ``(N,)`` bool the shell's state, set to the rows that ended.
        state: the batch's :data:`STATE`, updated in place.
        tables: the instance's :data:`TABLES`.
        with_embeddings: whether the family has features.

    Returns:
        ``values``, ``ints``, ``tokens`` (three rows: the summary's two, the observation's
        response), ``embedding``, then :func:`observe`'s four arrays.
    """
    terminated = flags[1]
    values, ints, tokens, embedding = summarise(terminated, utility, state, tables, 3, with_embeddings)
    restart(restart_index, new_queries, new_noise, state, tables)
    query, candidate_tokens, action_mask, embeddings = observe(state, tables, ints, tokens, with_embeddings)
    for row in range(terminated.shape[0]):
        ended = terminated[row]
        flags[2, row] = ended
        flags[3, row] = False
        autoreset[row] = ended
    flags[4:, :] = True
    return values, ints, tokens, embedding, query, candidate_tokens, action_mask, embeddings
