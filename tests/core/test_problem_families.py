"""Properties of every utility family: DDMC, monotonicity, norms, exact optima."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.small_problems import exact_ddmc_families, linear, multi_armed
from tokenized_bandit_gym.core import LINEAR_FAMILIES, MULTI_ARMED_FAMILIES

ALL_LINEAR = list(LINEAR_FAMILIES)  # the registry's: a new family gets every test here
ALL_MULTI_ARMED = list(MULTI_ARMED_FAMILIES)
DDMC_FAMILIES = exact_ddmc_families()
DDMC_PRIME_FAMILIES = [family for family in ALL_MULTI_ARMED if multi_armed(family).ddmc]


def random_pairs(generator: torch.Generator, problem, count: int, length: int):
    """``count`` pairs of different same-length non-EOS responses and a common token."""
    n = problem.vocab_size
    y = torch.randint(0, n - 1, (count, length), generator=generator)
    z = torch.randint(0, n - 1, (count, length), generator=generator)
    keep = (y != z).any(dim=1)
    tau = torch.randint(0, n, (count, 1), generator=generator)
    queries = torch.randint(0, problem.num_queries, (count,), generator=generator)
    return queries[keep], y[keep], z[keep], tau[keep]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), length=st.integers(0, 2), family_index=st.integers(0, len(DDMC_FAMILIES) - 1))
def test_ddmc_holds_for_families_that_claim_it(seed: int, length: int, family_index: int) -> None:
    family, extra = DDMC_FAMILIES[family_index]
    problem = linear(family, seed, **extra)
    assert problem.ddmc
    generator = torch.Generator().manual_seed(seed)
    queries, y, z, tau = random_pairs(generator, problem, 200, length + 1)
    before = (problem.utility(queries, y) - problem.utility(queries, z)).abs()
    after = (problem.utility(queries, torch.cat([y, tau], 1)) - problem.utility(queries, torch.cat([z, tau], 1))).abs()
    assert bool((after <= before + 1e-12).all())


@pytest.mark.parametrize("violation", [0.5, 2.0])
def test_markov_violates_ddmc_measurably(violation: float) -> None:
    worst = []
    for seed in range(3):
        problem = linear("markov", seed, ddmc_violation=violation)
        assert not problem.ddmc
        generator = torch.Generator().manual_seed(seed)
        queries, y, z, tau = random_pairs(generator, problem, 2000, 2)
        before = (problem.utility(queries, y) - problem.utility(queries, z)).abs()
        after = (
            problem.utility(queries, torch.cat([y, tau], 1)) - problem.utility(queries, torch.cat([z, tau], 1))
        ).abs()
        worst.append(float((after - before).max()))
    assert max(worst) > 1e-3


def test_markov_violation_grows_with_weight() -> None:
    def violation_share(weight: float) -> float:
        problem = linear("markov", 1, ddmc_violation=weight)
        generator = torch.Generator().manual_seed(5)
        queries, y, z, tau = random_pairs(generator, problem, 3000, 2)
        before = (problem.utility(queries, y) - problem.utility(queries, z)).abs()
        after = (
            problem.utility(queries, torch.cat([y, tau], 1)) - problem.utility(queries, torch.cat([z, tau], 1))
        ).abs()
        return float((after > before + 1e-12).double().mean())

    assert violation_share(0.0) == 0.0
    assert violation_share(0.2) < violation_share(2.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), family=st.sampled_from(ALL_LINEAR + ["tmab_" + f for f in ALL_MULTI_ARMED]))
def test_tokens_after_eos_change_nothing(seed: int, family: str) -> None:
    problem = multi_armed(family[5:], seed) if family.startswith("tmab_") else linear(family, seed)
    generator = torch.Generator().manual_seed(seed)
    n, length, eos = problem.vocab_size, problem.max_length, problem.eos_token_id
    count = 64
    head = torch.randint(0, n - 1, (count, length), generator=generator)
    stop = torch.randint(1, length + 1, (count,), generator=generator)
    positions = torch.arange(length)[None, :]
    complete = torch.where(positions < stop[:, None] - 1, head, eos)
    complete = torch.where(positions == stop[:, None] - 1, eos, complete)
    tail = torch.randint(0, n, (count, length), generator=generator)
    noisy = torch.where(positions >= stop[:, None], tail, complete)
    queries = torch.randint(0, problem.num_queries, (count,), generator=generator)
    assert torch.equal(problem.utility(queries, complete), problem.utility(queries, noisy))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), family=st.sampled_from(ALL_LINEAR))
def test_embeddings_have_norm_at_most_one(seed: int, family: str) -> None:
    problem = linear(family, seed)
    generator = torch.Generator().manual_seed(seed)
    count = 256
    responses = torch.randint(0, problem.vocab_size, (count, problem.max_length), generator=generator)
    lengths = torch.randint(0, problem.max_length + 1, (count,), generator=generator)
    queries = torch.randint(0, problem.num_queries, (count,), generator=generator)
    norms = problem.embed(queries, responses, lengths).norm(dim=1)
    assert float(norms.max()) <= 1.0 + 1e-12
    assert float(problem.theta.norm()) <= 1.0 + 1e-12


@pytest.mark.parametrize("fixed_length", [False, True])
@pytest.mark.parametrize("family", ALL_LINEAR)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_linear_optimum_equals_brute_force(family: str, seed: int, fixed_length: bool) -> None:
    problem = linear(family, seed, fixed_length)
    queries = torch.arange(problem.num_queries)
    exact = problem.optimal(queries)
    brute = problem.enumerated_optimum(queries)
    torch.testing.assert_close(exact.utility, brute.utility, rtol=0, atol=1e-12)
    torch.testing.assert_close(problem.utility(queries, exact.responses), exact.utility, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fixed_length", [False, True])
@pytest.mark.parametrize("family", ALL_MULTI_ARMED)
@pytest.mark.parametrize("seed", [0, 3])
def test_multi_armed_optimum_equals_brute_force(family: str, seed: int, fixed_length: bool) -> None:
    problem = multi_armed(family, seed, fixed_length)
    queries = torch.zeros(1, dtype=torch.int64)
    exact = problem.optimal(queries)
    brute = problem.enumerated_optimum(queries)
    torch.testing.assert_close(exact.utility, brute.utility, rtol=0, atol=1e-12)
    torch.testing.assert_close(problem.utility(queries, exact.responses), exact.utility, rtol=0, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), family=st.sampled_from(ALL_MULTI_ARMED))
def test_multi_armed_utilities_lie_in_unit_interval(seed: int, family: str) -> None:
    from tokenized_bandit_gym.core import complete_responses

    problem = multi_armed(family, seed)
    responses = complete_responses(problem.vocab_size, problem.max_length, problem.eos_token_id)
    values = problem.utility(torch.zeros(responses.shape[0], dtype=torch.int64), responses)
    assert float(values.min()) >= 0.0 and float(values.max()) <= 1.0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), length=st.integers(0, 1), family=st.sampled_from(DDMC_PRIME_FAMILIES))
def test_multi_armed_ddmc_prime_holds(seed: int, length: int, family: str) -> None:
    """Appendix assumption DDMC': |u(y:tau:EOS) - u(z:tau:EOS)| <= |u(y:EOS) - u(z:EOS)|."""
    problem = multi_armed(family, seed)
    assert problem.ddmc
    generator = torch.Generator().manual_seed(seed)
    queries, y, z, tau = random_pairs(generator, problem, 200, length + 1)
    queries = torch.zeros_like(queries)
    eos = torch.full_like(tau, problem.eos_token_id)
    before = (problem.utility(queries, torch.cat([y, eos], 1)) - problem.utility(queries, torch.cat([z, eos], 1))).abs()
    after = (
        problem.utility(queries, torch.cat([y, tau, eos], 1)) - problem.utility(queries, torch.cat([z, tau, eos], 1))
    ).abs()
    assert bool((after <= before + 1e-12).all())


@pytest.mark.parametrize("family,extra", DDMC_FAMILIES)
@pytest.mark.parametrize("seed", range(5))
def test_greedy_is_optimal_with_fixed_length_on_ddmc_families(family: str, extra: dict, seed: int) -> None:
    """Theorem 5.1 with SLD 0 at the first deviation is not needed: fixed length makes greedy exact."""
    problem = linear(family, seed, fixed_length=True, **extra)
    queries = torch.arange(problem.num_queries)
    greedy = problem.oracle_greedy(queries)
    brute = problem.enumerated_optimum(queries)
    torch.testing.assert_close(greedy.utility, brute.utility, rtol=0, atol=1e-12)


def test_random_table_greedy_can_miss_the_optimum() -> None:
    """Without DDMC greedy decoding is not optimal in general (Proposition 4.1's instance)."""
    gaps = []
    for seed in range(20):
        problem = multi_armed("random_table", seed)
        queries = torch.zeros(1, dtype=torch.int64)
        gaps.append(float(problem.optimal(queries).utility - problem.oracle_greedy(queries).utility))
    assert min(gaps) >= 0.0 and max(gaps) > 0.0


def test_needle_hides_the_optimum_from_every_prefix() -> None:
    problem = linear("needle", 4)
    queries = torch.arange(problem.num_queries)
    best = problem.optimal(queries)
    assert torch.equal(best.utility, torch.ones_like(best.utility))
    for prefix_length in range(problem.max_length):
        prefixes = best.responses[:, :prefix_length]
        assert torch.equal(problem.utility(queries, prefixes), torch.zeros(problem.num_queries, dtype=torch.float64))


def test_embed_matches_stepwise_candidate_embeddings() -> None:
    problem = linear("markov", 2)
    generator = torch.Generator().manual_seed(0)
    responses = torch.randint(0, problem.vocab_size - 1, (8, problem.max_length - 1), generator=generator)
    queries = torch.randint(0, problem.num_queries, (8,), generator=generator)
    state = problem.initial_state(queries)
    for position in range(responses.shape[1]):
        candidates = problem.candidate_embeddings(state)  # (B, n, d)
        prefix_plus = [
            problem.embed(queries, torch.cat([responses[:, :position], torch.full((8, 1), tau)], 1))
            for tau in range(problem.vocab_size)
        ]
        torch.testing.assert_close(candidates, torch.stack(prefix_plus, 1), rtol=0, atol=1e-12)
        state = problem.advance(state, responses[:, position])


def test_registry_lists_the_families_that_claim_ddmc() -> None:
    assert [family for family, _ in DDMC_FAMILIES[:-1]] == ["discounted", "meanpool"]
    assert DDMC_PRIME_FAMILIES == ["discounted", "meanpool"]


def test_family_keywords_are_checked_against_the_registry() -> None:
    with pytest.raises(ValueError, match=r"alpha=0.5 applies to family \['discounted', 'markov'\]"):
        linear("meanpool", alpha=0.5)
    with pytest.raises(ValueError, match="needle_gap"):
        multi_armed("discounted", needle_gap=0.2)
