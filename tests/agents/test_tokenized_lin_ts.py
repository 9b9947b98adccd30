"""TokenizedLinTS: the posterior sample's law, one sample per round, determinism under a seed."""

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.agents.tokenized_lin_ts import TokenizedLinTS
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.task import Task


def test_sample_has_mean_theta_hat_and_covariance_v2_sigma_inverse():
    env = gym.make("TokenizedLinearBandit-v0", embedding_dim=3, vocab_size=4, max_length=3)
    agent = TokenizedLinTS(v=0.7)
    agent.reset(Task.from_env(env, 10), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.standard_normal(3) / 2
        agent.confidence.update(y, float(rng.standard_normal()))
    samples = agent.sample(20_000).numpy()
    covariance = 0.49 * agent.confidence.design_inverse.numpy()
    np.testing.assert_allclose(
        samples.mean(0), agent.confidence.theta_hat.numpy(), atol=4 * np.sqrt(covariance.max() / 20_000) + 1e-3
    )
    np.testing.assert_allclose(np.cov(samples.T), covariance, rtol=0.1, atol=2e-3)


def test_one_sample_per_round_and_determinism_under_a_seed():
    def play(seed):
        env = gym.make("TokenizedLinearBandit-v0", vocab_size=5, embedding_dim=4, max_length=4)
        return run_online(env, agents.make("tokenized_lin_ts"), 30, seed=seed).regret

    np.testing.assert_array_equal(play(3), play(3))
    assert not np.array_equal(play(3), play(4))
    env = gym.make("TokenizedLinearBandit-v0", vocab_size=5, embedding_dim=4, max_length=4)
    agent = TokenizedLinTS()
    agent.reset(Task.from_env(env, 5), seed=0)
    observation, info = env.reset(seed=0)
    agent.act(observation, info)
    first = agent.theta_sample
    observation, *_ = env.step(0)
    agent.act(observation, info)
    assert agent.theta_sample is first


@pytest.mark.parametrize("v", ["posterior", -1.0])
def test_invalid_scale_raises(v):
    with pytest.raises(ValueError):
        TokenizedLinTS(v=v)
