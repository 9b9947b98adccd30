"""Theorem 5.1 by enumeration: with fixed_length on exact-DDMC families, OracleGreedy is exactly optimal."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tests.core.small_problems import exact_ddmc_families
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.core.problem_factory import make_linear_problem
from tokenized_bandit_gym.evaluation.run_online import run_online

EXACT_DDMC = exact_ddmc_families()  # from the family registry


def small_problem(family, extra, instance_seed, fixed_length=True, **sizes):
    kwargs = {"vocab_size": 5, "max_length": 4, "embedding_dim": 3, "num_queries": 6, "query_length": 3}
    kwargs.update(sizes)
    return make_linear_problem(
        family,
        **kwargs,
        instance_seed=instance_seed,
        fixed_length=fixed_length,
        device="cpu",
        dtype=torch.float64,
        **extra,
    )


def greedy_gap(problem):
    queries = torch.arange(problem.num_queries)
    enumerated = problem.enumerated_optimum(queries)
    greedy = problem.oracle_greedy(queries)
    return enumerated, greedy, (enumerated.utility - greedy.utility)


@pytest.mark.parametrize(("family", "extra"), EXACT_DDMC)
@settings(max_examples=8, deadline=None)
@given(instance_seed=st.integers(0, 10_000), vocab_size=st.integers(3, 5), max_length=st.integers(2, 4))
def test_oracle_greedy_is_the_enumerated_optimum_with_fixed_length(
    family, extra, instance_seed, vocab_size, max_length
):
    problem = small_problem(family, extra, instance_seed, vocab_size=vocab_size, max_length=max_length)
    assert problem.ddmc
    enumerated, greedy, gap = greedy_gap(problem)
    assert torch.all(gap.abs() <= 1e-12), f"greedy gap {gap.tolist()}"
    # The family's exact optimum (dynamic program or closed form) agrees with the enumeration too.
    optimal = problem.optimal(torch.arange(problem.num_queries))
    assert torch.allclose(optimal.utility, enumerated.utility, rtol=0.0, atol=1e-12)


@pytest.mark.parametrize("instance_seed", [0, 1])
def test_the_enumeration_check_has_power_without_ddmc(instance_seed):
    # A strong DDMC violation (markov, ddmc_violation = 1) leaves a positive greedy gap somewhere.
    gaps = [
        float(greedy_gap(small_problem("markov", {"ddmc_violation": 1.0}, seed, max_length=4))[2].max())
        for seed in range(instance_seed * 5, instance_seed * 5 + 5)
    ]
    assert max(gaps) > 1e-6


@pytest.mark.parametrize("family", [family for family, extra in EXACT_DDMC if not extra])
def test_oracle_greedy_agent_has_zero_regret_on_fixed_length_envs(family):
    env = gym.make(
        "TokenizedLinearBandit-v0", family=family, vocab_size=6, max_length=4, embedding_dim=4, fixed_length=True
    )
    result = run_online(env, agents.make("oracle_greedy"), 30, seed=0)
    assert np.all(np.abs(result.regret) <= 1e-12)
