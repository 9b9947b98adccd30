"""The core's shortcuts for a batch-of-one step equal the general batched path they stand for.

``extend`` (advance without masks), ``append_every_token`` (append with every token),
``utility_of_complete``, the discounted family's candidate embeddings, the query last-token
table, the action-mask table, the pool benchmarks and the per-query round starts are each
compared with the general computation they replace, bit for bit, over every family.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from tests.core.small_problems import linear, multi_armed
from tokenized_bandit_gym.core import (
    LINEAR_FAMILIES,
    MULTI_ARMED_FAMILIES,
    DecodingState,
    LinearTokenizedProblem,
    TokenizedProblem,
)
from tokenized_bandit_gym.core import discounted_problem as discounted_module
from tokenized_bandit_gym.core import query_start_memo as memo_module
from tokenized_bandit_gym.core.action_mask_table import ActionMaskTable
from tokenized_bandit_gym.core.pool_benchmarks import PoolBenchmarks
from tokenized_bandit_gym.core.query_start_memo import QueryStartMemo

LINEAR = list(LINEAR_FAMILIES)  # the registry's: a new family gets every test here
MULTI_ARMED = list(MULTI_ARMED_FAMILIES)


def make(kind: str, family: str, fixed_length: bool = False, seed: int = 0) -> TokenizedProblem:
    if kind == "linear":
        vocab_size = 3 if family == "needle" else 5
        return linear(family, seed, fixed_length, vocab_size=vocab_size, num_queries=6)
    return multi_armed(family, seed, fixed_length)


PROBLEMS = [("linear", family) for family in LINEAR] + [("multi_armed", family) for family in MULTI_ARMED]


def random_states(problem: TokenizedProblem, generator: torch.Generator, count: int = 24) -> DecodingState:
    """``count`` rounds on random queries, replayed for random numbers of random tokens."""
    queries = torch.randint(0, problem.num_queries, (count,), generator=generator)
    responses = torch.randint(0, problem.vocab_size, (count, problem.max_length), generator=generator)
    lengths = torch.randint(0, problem.max_length + 1, (count,), generator=generator)
    return problem.state_for(queries, responses, lengths)


def assert_states_equal(actual: DecodingState, expected: DecodingState, rows: torch.Tensor) -> None:
    for field in ("queries", "tokens", "lengths", "finished", "carry", "last_tokens"):
        assert torch.equal(getattr(actual, field)[rows], getattr(expected, field)[rows]), field


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_extend_equals_advance_on_rows_that_grow(kind: str, family: str, seed: int) -> None:
    problem = make(kind, family, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    state = random_states(problem, generator)
    tokens = torch.randint(0, problem.vocab_size, (state.batch_size,), generator=generator)
    tokens = torch.where(state.lengths >= problem.max_length - 1, problem.eos_token_id, tokens)
    grow = ~state.finished & (state.lengths < problem.max_length)
    assert grow.any() and (~grow).any()
    expected = problem.advance(state, tokens).select(grow)
    growing, grown_tokens = state.select(grow), tokens[grow]
    everyone = torch.ones(growing.batch_size, dtype=torch.bool)
    assert_states_equal(problem.extend(growing, grown_tokens), expected, everyone)
    carries = problem.candidate_carries(growing)  # (B', n, *c)
    chosen = carries[torch.arange(growing.batch_size), grown_tokens]
    assert_states_equal(problem.extend(growing, grown_tokens, chosen), expected, everyone)
    with pytest.raises(RuntimeError):
        problem.extend(state, tokens)  # rows holding L tokens have no column left


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
@pytest.mark.parametrize("seed", [0, 3])
def test_append_every_token_equals_append_of_the_vocabulary(kind: str, family: str, seed: int) -> None:
    problem = make(kind, family, seed=seed)
    state = random_states(problem, torch.Generator().manual_seed(seed))
    tokens = problem.vocabulary.expand(state.batch_size, -1)
    expected = problem.append(state.queries, state.carry, state.last_tokens, tokens, state.lengths + 1)
    actual = problem.append_every_token(state.queries, state.carry, state.last_tokens, state.lengths)
    assert torch.equal(actual, expected)
    assert torch.equal(problem.candidate_carries(state), expected)


@pytest.mark.parametrize("family", ["discounted", "markov"])
def test_every_token_features_without_the_table(monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    monkeypatch.setattr(discounted_module, "FEATURE_TABLE_LIMIT", 0)
    problem = make("linear", family)
    assert problem._feature_table is None
    state = random_states(problem, torch.Generator().manual_seed(5))
    tokens = problem.vocabulary.expand(state.batch_size, -1)
    expected = problem.append(state.queries, state.carry, state.last_tokens, tokens, state.lengths + 1)
    actual = problem.append_every_token(state.queries, state.carry, state.last_tokens, state.lengths)
    assert torch.equal(actual, expected)
    tabulated = make("linear", family)
    assert torch.equal(tabulated.candidate_carries(state), actual)


@pytest.mark.parametrize("family", ["discounted", "markov"])
def test_position_scores_from_the_scaled_rows_equal_the_scaled_features(
    monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    tabulated = make("linear", family)
    assert tabulated._feature_table is not None
    queries = torch.tensor([0, 3, 3, 5, 1])
    from_rows = tabulated.position_scores(queries)
    monkeypatch.setattr(discounted_module, "FEATURE_TABLE_LIMIT", 0)
    computed = make("linear", family)  # c * phi(x, tau, j) @ theta from the parameters
    assert computed._feature_table is None
    assert torch.equal(from_rows, computed.position_scores(queries))


@pytest.mark.parametrize("family", LINEAR)
@pytest.mark.parametrize("seed", [0, 4])
def test_candidate_utilities_equal_the_utility_of_each_candidate(family: str, seed: int) -> None:
    problem = make("linear", family, seed=seed)
    state = random_states(problem, torch.Generator().manual_seed(seed))
    general = TokenizedProblem.candidate_utilities(problem, state)  # utility_of_states on every candidate's carry
    assert torch.equal(problem.candidate_utilities(state), general)
    assert torch.equal(problem.candidate_utilities(state.select(torch.tensor([2, 0]))), general[[2, 0]])


def generic_greedy(problem: TokenizedProblem, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding that scores every candidate (:meth:`TokenizedProblem._greedy_tokens`): ``(utility, tokens)``."""
    state = problem.initial_state(queries)
    for _ in range(problem.max_length):
        state = problem.advance(state, TokenizedProblem._greedy_tokens(problem, state))
    return problem.utility_of(state), state.tokens


@pytest.mark.parametrize("family", LINEAR)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seed", [0, 4])
def test_greedy_tokens_equal_the_argmax_over_every_candidate(
    monkeypatch: pytest.MonkeyPatch, family: str, dtype: torch.dtype, seed: int
) -> None:
    monkeypatch.setattr(discounted_module, "GREEDY_SCREEN_MIN_ENTRIES", 0)  # the screen at every size
    problem = linear(family, seed, vocab_size=3 if family == "needle" else 7, num_queries=6, dtype=dtype)
    state = random_states(problem, torch.Generator().manual_seed(seed))
    assert torch.equal(problem._greedy_tokens(state), TokenizedProblem._greedy_tokens(problem, state))
    pool = torch.arange(problem.num_queries)
    utility, tokens = generic_greedy(problem, pool)
    greedy = problem.greedy_decode(pool)
    assert torch.equal(greedy.responses, tokens) and torch.equal(greedy.utility, utility)


@pytest.mark.parametrize("tie", ["equal", "one ulp above", "one ulp below", "permuted entries", "theta zero"])
def test_greedy_tokens_break_exact_and_near_ties_as_the_argmax_over_every_candidate(
    monkeypatch: pytest.MonkeyPatch, tie: str
) -> None:
    monkeypatch.setattr(discounted_module, "GREEDY_SCREEN_MIN_ENTRIES", 0)  # the screen at every size
    problem = linear("discounted", 2, vocab_size=7, num_queries=6)
    rows = problem._scaled_rows().view(-1, problem.vocab_size, problem.embedding_dim)  # (Q * (L + 1), n, d)
    if tie == "theta zero":
        problem.theta = torch.zeros_like(problem.theta)  # every score 0: the lowest allowed id wins
    elif tie == "permuted entries":  # equal scores in exact arithmetic, apart by roundings: the order of the sums
        problem.theta = torch.ones_like(problem.theta)
        for token, permutation in enumerate(itertools.permutations(range(problem.embedding_dim)), start=1):
            rows[:, token] = rows[:, 0, list(permutation)]
    else:  # token 5 copies token 1's features (a tie), or moves one entry by one ulp
        direction = {"equal": 0.0, "one ulp above": math.inf, "one ulp below": -math.inf}[tie]
        rows[:, 5] = rows[:, 1]
        if direction:
            rows[:, 5, 0] = torch.nextafter(rows[:, 1, 0], torch.tensor(direction, dtype=rows.dtype))
    state = random_states(problem, torch.Generator().manual_seed(1), count=64)
    assert torch.equal(problem._greedy_tokens(state), TokenizedProblem._greedy_tokens(problem, state))
    pool = torch.arange(problem.num_queries)
    assert torch.equal(problem.greedy_decode(pool).responses, generic_greedy(problem, pool)[1])


@pytest.mark.parametrize("family", LINEAR)
def test_candidate_embeddings_equal_the_embedding_of_each_candidate(family: str) -> None:
    problem = make("linear", family)
    assert isinstance(problem, LinearTokenizedProblem)
    state = random_states(problem, torch.Generator().manual_seed(7))
    carries = problem.candidate_carries(state)
    general = LinearTokenizedProblem.candidate_embeddings(problem, state, carries)
    assert torch.equal(problem.candidate_embeddings(state, carries), general)
    assert torch.equal(problem.candidate_embeddings(state), general)


@pytest.mark.parametrize("family", LINEAR)
@pytest.mark.parametrize("off_the_cpu", [False, True])
def test_observed_candidate_embeddings_are_the_candidate_embeddings_rounded(
    monkeypatch: pytest.MonkeyPatch, family: str, off_the_cpu: bool
) -> None:
    problem = make("linear", family)
    assert isinstance(problem, LinearTokenizedProblem)
    if off_the_cpu:  # the branch a GPU (or a trace) takes: the sum rounded to float32 as it is written
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    state = random_states(problem, torch.Generator().manual_seed(8), count=40)
    wanted = LinearTokenizedProblem.candidate_embeddings(problem, state).to(torch.float32)
    observed = problem.observed_candidate_embeddings(state)
    assert observed.dtype == torch.float32 and torch.equal(observed, wanted)
    carries = torch.empty_like(problem.candidate_carries(state))
    assert torch.equal(problem.observed_candidate_embeddings(state, carries), wanted)
    assert torch.equal(carries, problem.candidate_carries(state))


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
def test_utility_of_complete_equals_utility_of(kind: str, family: str) -> None:
    problem = make(kind, family)
    state = random_states(problem, torch.Generator().manual_seed(11), count=64)
    complete = state.select(state.finished)
    assert complete.batch_size > 0
    assert torch.equal(problem.utility_of_complete(complete), problem.utility_of(complete))


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
def test_query_last_tokens_are_the_last_query_tokens(kind: str, family: str) -> None:
    problem = make(kind, family)
    for query in range(problem.num_queries):
        length = int(problem.query_lengths[query])
        assert int(problem.query_last_tokens[query]) == int(problem.query_tokens[query, max(length - 1, 0)])


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
@pytest.mark.parametrize("fixed_length", [False, True])
def test_action_mask_table_equals_action_mask(kind: str, family: str, fixed_length: bool) -> None:
    problem = make(kind, family, fixed_length)
    table = ActionMaskTable(problem)
    state = random_states(problem, torch.Generator().manual_seed(13), count=64)
    masks = problem.action_mask(state)
    for row in range(state.batch_size):
        index = table.row(int(state.lengths[row]), bool(state.finished[row]))
        assert table.allowed[index].tolist() == masks[row].tolist()
        assert table.allowed_int8[index].tolist() == masks[row].int().tolist()
    with pytest.raises(ValueError, match="length must lie in"):
        table.row(problem.max_length + 1, False)


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
@pytest.mark.parametrize("fixed_length", [False, True])
def test_pool_benchmarks_equal_a_fresh_computation_per_query(kind: str, family: str, fixed_length: bool) -> None:
    benchmarks = PoolBenchmarks.from_problem(make(kind, family, fixed_length))
    fresh = make(kind, family, fixed_length)  # nothing cached yet
    for query in range(fresh.num_queries):
        queries = torch.tensor([query])
        exact = fresh._exact_optimum(queries)
        assert benchmarks.optimal_responses[query].tolist() == exact.responses[0].tolist()
        assert benchmarks.optimal_utility[query] == float(fresh.utility(queries, exact.responses)[0])
        assert benchmarks.oracle_greedy_utility[query] == float(fresh.greedy_decode(queries).utility[0])
    assert not benchmarks.optimal_utility.flags.writeable


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
@pytest.mark.parametrize("with_candidates", [False, True])
def test_query_start_memo_equals_a_fresh_start(kind: str, family: str, with_candidates: bool) -> None:
    problem = make(kind, family)
    memo = QueryStartMemo(problem, with_candidates)
    for query in list(range(problem.num_queries)) * 2:  # second pass: read from the memo
        start = memo.get(query)
        state = problem.initial_state(torch.tensor([query]))
        assert_states_equal(start.state, state, torch.tensor([True]))
        if not with_candidates:
            assert start.candidate_carries is None and start.candidate_embeddings is None
            continue
        carries = problem.append(
            state.queries, state.carry, state.last_tokens, problem.vocabulary.expand(1, -1), state.lengths + 1
        )
        assert torch.equal(start.candidate_carries, carries)
        if isinstance(problem, LinearTokenizedProblem):
            embeddings = LinearTokenizedProblem.candidate_embeddings(problem, state, carries)[0].float()
            assert torch.equal(start.candidate_embeddings, embeddings)
    assert len(memo) == problem.num_queries


def test_query_start_memo_drops_the_oldest_query_beyond_its_capacity(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = make("linear", "discounted")
    monkeypatch.setattr(memo_module, "MEMO_BYTE_CAP", 1)
    memo = QueryStartMemo(problem, with_candidates=True)
    assert memo.capacity == 1
    for query in [0, 3, 3, 5, 0]:
        assert torch.equal(memo.get(query).candidate_carries, memo.compute(query).candidate_carries)
        assert len(memo) == 1
    with pytest.raises(ValueError, match="query must lie in"):
        memo.get(problem.num_queries)


def test_query_start_memo_is_sized_in_bytes_so_large_d_holds_as_many_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo_module, "available_memory_bytes", lambda: 1 << 40)  # the cap applies
    for dim in (16, 128):
        problem = linear("discounted", embedding_dim=dim, vocab_size=5)
        memo = QueryStartMemo(problem, with_candidates=True)
        candidate_bytes = problem.vocab_size * dim * (8 + 4)  # (1, n, d) float64 carries, (n, d) float32 embeddings
        held = memo.capacity * candidate_bytes  # the candidates' bytes of a full memo
        assert memo_module.MEMO_BYTE_CAP / 4 <= held <= memo_module.MEMO_BYTE_CAP


def test_query_start_memo_takes_a_fraction_of_the_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo_module, "available_memory_bytes", lambda: 64 << 20)
    assert memo_module.memo_byte_budget() == int((64 << 20) * memo_module.MEMO_AVAILABLE_FRACTION)
    monkeypatch.setattr(memo_module, "available_memory_bytes", lambda: None)
    assert memo_module.memo_byte_budget() == min(memo_module.MEMO_BYTE_CAP, memo_module.MEMO_FALLBACK_BYTES)


@pytest.mark.parametrize("family", LINEAR)
def test_host_candidate_carries_equal_the_cores_bit_for_bit(family: str) -> None:
    problem = make("linear", family)
    generator = torch.Generator().manual_seed(4)
    state = random_states(problem, generator)
    expected = problem.candidate_carries(state)  # (B, n, *c)
    answered = 0
    for row in range(state.queries.shape[0]):
        host = problem.host_candidate_carries(
            int(state.queries[row]), int(state.lengths[row]), state.carry[row].numpy()
        )
        if host is not None:
            assert torch.equal(torch.from_numpy(host), expected[row])
            answered += 1
    assert answered in (0, state.queries.shape[0])  # a family answers for every state or none
    if family == "discounted":
        assert answered > 0


@pytest.mark.parametrize(("kind", "family"), PROBLEMS)
def test_host_carry_rows_replay_the_cores_carries_bit_for_bit(kind: str, family: str) -> None:
    """From a zero carry, ``alpha * carry + rows[x (L + 1) + |y|, tau]`` is the core's carry (with the table)."""
    problem = make(kind, family)
    carry_rows = problem.host_carry_rows()
    if carry_rows is None:
        pytest.skip(f"{kind} {family}: no carry table (the host batch takes the core's way)")
    alpha, rows = carry_rows
    generator = torch.Generator().manual_seed(5)
    state = random_states(problem, generator)
    carries = state.carry.numpy()  # (B, *c) the core's
    for row in range(state.batch_size):
        carry = np.zeros(rows.shape[2:], dtype=rows.dtype)  # (*c,)
        for position in range(int(state.lengths[row])):
            token = int(state.tokens[row, position])
            carry = alpha * carry + rows[int(state.queries[row]) * (problem.max_length + 1) + position, token]
        np.testing.assert_array_equal(carry, carries[row])
    candidates = alpha * carries[:, None] + rows[(state.queries * (problem.max_length + 1) + state.lengths).numpy()]
    unfinished = ~state.finished.numpy() & (state.lengths.numpy() < problem.max_length)
    np.testing.assert_array_equal(candidates[unfinished], problem.candidate_carries(state).numpy()[unfinished])


def test_host_carry_rows_is_given_where_the_carry_is_the_discounted_table() -> None:
    assert make("linear", "discounted").host_carry_rows() is not None
    assert make("multi_armed", "discounted").host_carry_rows() is not None
    assert make("linear", "markov").host_carry_rows() is None  # the bigram term reads the last token
