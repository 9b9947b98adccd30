"""The pairwise agents (dueling_eoful, tpop) and their Bradley-Terry fit; scalar agents refused on pairwise envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.agents.bradley_terry import BradleyTerryFit
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.task import Task

# A small fixed-length TLB (exact DDMC: greedy with the true utility is optimal), informative comparisons.
SMALL_PAIRWISE = {
    "vocab_size": 8,
    "max_length": 4,
    "embedding_dim": 3,
    "fixed_length": True,
    "feedback": "pairwise",
    "preference_temperature": 0.2,
}


def pairwise_env(**kwargs: object) -> gym.Env:
    return gym.make("TokenizedLinearBandit-v0", **{**SMALL_PAIRWISE, **kwargs})


def regret_slope(cumulative_regret: np.ndarray, first: int) -> float:
    """Least-squares slope of log cumulative regret against log t, over rounds ``first .. T``."""
    rounds = np.unique(np.geomspace(first, len(cumulative_regret), 20).astype(int))
    return float(np.polyfit(np.log(rounds), np.log(cumulative_regret[rounds - 1]), 1)[0])


def cosine(first: np.ndarray, second: np.ndarray) -> float:
    return float(first @ second / (np.linalg.norm(first) * np.linalg.norm(second)))


def test_bradley_terry_fit_is_the_stationary_point_and_recovers_theta_from_logistic_data() -> None:
    rng = np.random.default_rng(0)
    theta = np.array([2.0, -1.0, 0.5])
    fit = BradleyTerryFit(3, lambda_=1.0, capacity=4)  # the buffer grows past its capacity
    for difference in rng.normal(size=(4000, 3)):
        fit.add(difference, float(rng.random() < 1.0 / (1.0 + np.exp(-difference @ theta))))
    estimate = fit.fit()
    z, labels = fit.differences, fit.labels
    gradient = z.T @ (1.0 / (1.0 + np.exp(-z @ estimate)) - labels) + estimate  # the objective's gradient
    assert np.linalg.norm(gradient) < 1e-6
    for perturbation in rng.normal(scale=1e-2, size=(5, 3)):
        assert fit.negative_log_likelihood(estimate) < fit.negative_log_likelihood(estimate + perturbation)
    assert cosine(estimate, theta) > 0.99 and np.linalg.norm(estimate - theta) < 0.3


def test_bradley_terry_fit_refuses_bad_comparisons() -> None:
    fit = BradleyTerryFit(2)
    with pytest.raises(ValueError, match="shape"):
        fit.add(np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="0.5"):
        fit.add(np.zeros(2), 0.5)
    with pytest.raises(ValueError, match="lambda_"):
        BradleyTerryFit(2, lambda_=0.0)


@pytest.mark.slow
def test_dueling_eoful_regret_is_sublinear_and_it_recovers_thetas_direction() -> None:
    rounds = 2000
    env = pairwise_env(family="discounted")
    agent = agents.make("dueling_eoful", beta=2.0)
    result = run_online(env, agent, rounds, seed=0)
    quarters = result.regret.reshape(4, -1).mean(axis=1)  # (4,) mean regret per quarter of the run
    print(f"dueling_eoful regret by quarter {quarters}, slope {regret_slope(result.cumulative_regret, 200):.3f}")
    assert quarters[3] < 0.3 * quarters[0]  # regret per round decreases
    assert regret_slope(result.cumulative_regret, rounds // 2) < 0.7  # sublinear over the second half
    theta = env.unwrapped.problem.theta.numpy()
    assert cosine(agent.theta_hat, theta) > 0.9  # comparisons identify theta up to scale (theta / tau)


def test_dueling_eoful_with_no_optimism_plays_the_same_response_twice() -> None:
    env = pairwise_env()
    agent = agents.make("dueling_eoful", beta=0.0)
    result = run_online(env, agent, 20, seed=1)
    np.testing.assert_allclose(result.regret, result.optimal_utility - result.utility, atol=1e-12)
    observation, info = env.reset(seed=2)
    terminated = False
    while not terminated:
        observation, _, terminated, _, info = env.step(agent.act(observation, info))
    assert info["utilities"][0] == info["utilities"][1]  # both greedy under the same theta_hat
    np.testing.assert_array_equal(observation["first_response"], info["response"])


@pytest.mark.parametrize("name", ["dueling_eoful", "tpop"])
def test_same_seed_gives_the_same_trajectory(name: str) -> None:
    first = run_online(pairwise_env(), agents.make(name), 60, seed=3)
    second = run_online(pairwise_env(), agents.make(name), 60, seed=3)
    np.testing.assert_array_equal(first.regret, second.regret)
    np.testing.assert_array_equal(first.reward, second.reward)


@pytest.mark.parametrize("covariance", ["diagonal", "full"])
def test_tpop_learns_thetas_direction_and_its_second_response_differs_from_the_first(covariance: str) -> None:
    env = pairwise_env()
    agent = agents.make("tpop", covariance=covariance)
    run_online(env, agent, 400, seed=0)
    assert cosine(agent.theta_hat, env.unwrapped.problem.theta.numpy()) > 0.9
    observation, info = env.reset(seed=5)
    terminated = False
    while not terminated:
        observation, _, terminated, _, info = env.step(agent.act(observation, info))
    first, second = observation["first_response"], info["response"]
    length = env.unwrapped.problem.max_length
    assert np.all(first[: length - 1] != second[: length - 1])  # differs at every position but the forced EOS


def test_tpop_diagonal_and_full_bonus_agree_when_the_updates_are_axis_aligned() -> None:
    """With axis-aligned differences V is diagonal, so the two covariances give the same widths."""
    task_env = pairwise_env()
    diagonal, full = agents.make("tpop", covariance="diagonal"), agents.make("tpop", covariance="full")
    task = Task.from_env(task_env, 10)
    for agent in (diagonal, full):
        agent.reset(task)
    rng = np.random.default_rng(6)
    for axis, scale in zip(rng.integers(0, 3, size=20), rng.random(20), strict=True):
        update = np.zeros(3)
        update[axis] = scale
        diagonal.design_diagonal += update**2
        full.confidence.update(update, 0.0)
    probes = rng.normal(size=(7, 3))
    np.testing.assert_allclose(diagonal.bonus_widths(probes), full.bonus_widths(probes), rtol=1e-10)


@pytest.mark.parametrize("name", ["eoful", "greedy_etc", "tokenized_lin_ts"])
def test_a_scalar_agent_is_refused_on_a_pairwise_env(name: str) -> None:
    with pytest.raises(ValueError, match=rf"'{name}'.*feedback='pairwise'"):
        run_online(pairwise_env(), agents.make(name), 5, seed=0)
    vector = gym.make_vec("TokenizedLinearBandit-v0", 2, feedback="pairwise")
    with pytest.raises(ValueError, match="feedback='pairwise'"):
        run_online(vector, lambda: agents.make(name), 5, seed=0)


@pytest.mark.parametrize("name", ["dueling_eoful", "tpop"])
def test_a_pairwise_agent_is_refused_on_a_scalar_env(name: str) -> None:
    with pytest.raises(ValueError, match="feedback='scalar'"):
        run_online(gym.make("TokenizedLinearBandit-v0"), agents.make(name), 5, seed=0)


@pytest.mark.parametrize("name", ["random", "oracle_greedy"])
def test_reference_agents_play_pairwise_envs(name: str) -> None:
    result = run_online(pairwise_env(), agents.make(name), 30, seed=0)
    assert np.all(result.regret >= -1e-12)
    if name == "oracle_greedy":  # greedy is optimal on a fixed-length exact-DDMC family (Theorem 5.1)
        np.testing.assert_allclose(result.regret, 0.0, atol=1e-12)


@pytest.mark.parametrize("name", ["dueling_eoful", "tpop"])
def test_one_sub_env_of_the_vector_env_plays_exactly_the_single_env(name: str) -> None:
    from tokenized_bandit_gym.evaluation.run_online_vector import run_online_vector

    vector = gym.make_vec("TokenizedLinearBandit-v0", 1, **SMALL_PAIRWISE)
    batched = run_online_vector(vector, lambda: agents.make(name), 25, seed=7)
    single = run_online(pairwise_env(), agents.make(name), 25, seed=7)
    np.testing.assert_array_equal(batched.regret, single.regret)
    np.testing.assert_array_equal(batched.reward, single.reward)
