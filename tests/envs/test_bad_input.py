"""Bad input raises a clear exception naming the bad value; nothing is silently clipped."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym.envs import TokenizedLinearBanditEnv, TokenizedMultiArmedBanditEnv


@pytest.fixture
def env() -> TokenizedLinearBanditEnv:
    environment = TokenizedLinearBanditEnv()
    environment.reset(seed=0)
    return environment


@pytest.mark.parametrize(
    "action,error,pattern",
    [
        (16, ValueError, "16"),
        (-1, ValueError, "-1"),
        (np.int64(99), ValueError, "99"),
        (2.0, TypeError, "2.0"),
        (float("nan"), ValueError, "NaN"),
        (True, TypeError, "True"),
        ("3", TypeError, "'3'"),
        (np.array([1, 2]), TypeError, "1"),
    ],
)
def test_invalid_actions(env: TokenizedLinearBanditEnv, action: object, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        env.step(action)


def test_integer_like_actions_are_accepted(env: TokenizedLinearBanditEnv) -> None:
    for action in (1, np.int32(1), np.array(1)):
        fresh = TokenizedLinearBanditEnv()
        fresh.reset(seed=0)
        fresh.step(action)


def test_masked_action_raises_under_strict_actions() -> None:
    environment = TokenizedLinearBanditEnv(strict_actions=True, max_length=2)
    environment.reset(seed=0)
    environment.step(0)
    with pytest.raises(ValueError, match="masked"):
        environment.step(0)


def test_step_before_reset() -> None:
    with pytest.raises(ValueError, match="reset"):
        TokenizedLinearBanditEnv().step(0)
    with pytest.raises(gym.error.ResetNeeded):
        gym.make("TokenizedLinearBandit-v0").step(0)


def test_step_after_episode_ended(env: TokenizedLinearBanditEnv) -> None:
    env.step(env.eos_token_id)
    with pytest.raises(ValueError, match="ended"):
        env.step(0)


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({"vocab_size": 1}, ValueError, "vocab_size"),
        ({"vocab_size": 2.5}, TypeError, "vocab_size"),
        ({"max_length": 0}, ValueError, "max_length"),
        ({"embedding_dim": 0}, ValueError, "embedding_dim"),
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"alpha": -0.1}, ValueError, "alpha"),
        ({"alpha": float("nan")}, ValueError, "alpha"),
        ({"noise_scale": -0.1}, ValueError, "noise_scale"),
        ({"noise": "cauchy"}, ValueError, "cauchy"),
        ({"family": "unknown"}, ValueError, "unknown"),
        ({"family": "meanpool", "alpha": 0.5}, ValueError, "alpha"),
        ({"ddmc_violation": 0.5}, ValueError, "ddmc_violation"),
        ({"family": "markov", "ddmc_violation": -1.0}, ValueError, "ddmc_violation"),
        ({"family": "needle", "vocab_size": 2}, ValueError, "vocab_size"),
        ({"family": "needle", "needle_gap": 2.0}, ValueError, "needle_gap"),
        ({"num_queries": 0}, ValueError, "num_queries"),
        ({"instance_seed": -1}, ValueError, "instance_seed"),
        ({"theta_norm": 1.5}, ValueError, "theta_norm"),
        ({"device": "quantum"}, ValueError, "quantum"),
        ({"dtype": "int8"}, ValueError, "int8"),
        ({"render_mode": "human"}, ValueError, "human"),
        ({"fixed_length": "yes"}, TypeError, "yes"),
    ],
)
def test_invalid_linear_constructor_arguments(kwargs: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        TokenizedLinearBanditEnv(**kwargs)


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({"vocab_size": 1}, ValueError, "vocab_size"),
        ({"max_length": 0}, ValueError, "max_length"),
        ({"family": "needle"}, ValueError, "needle"),
        ({"family": "random_table", "vocab_size": 40, "max_length": 8}, ValueError, "max_length=8"),
        ({"family": "random_table", "alpha": 0.5}, ValueError, "alpha"),
        ({"noise": "bounded", "noise_scale": float("inf")}, ValueError, "noise_scale"),
    ],
)
def test_invalid_multi_armed_constructor_arguments(kwargs: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        TokenizedMultiArmedBanditEnv(**kwargs)


def test_embedding_oracle_rejects_bad_responses() -> None:
    problem = TokenizedLinearBanditEnv().problem
    import torch

    with pytest.raises(ValueError, match="16"):
        problem.embed(torch.tensor([0]), torch.tensor([[16]]))
    with pytest.raises(ValueError, match="max_length"):
        problem.embed(torch.tensor([0]), torch.zeros(1, 9, dtype=torch.int64))
    with pytest.raises(ValueError, match="query"):
        problem.embed(torch.tensor([32]), torch.zeros(1, 2, dtype=torch.int64))
