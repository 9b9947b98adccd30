"""EOFUL's feature scale S (issue 48): EOFUL on ``e / S`` is the plain OFUL of the divided features."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tests.agents.test_eoful import PlainLinUCB
from tokenized_bandit_gym.agents.eoful import EOFUL
from tokenized_bandit_gym.task import Task


def play(eoful: EOFUL, plain: PlainLinUCB, divide_by: float | None, rounds: int = 60) -> None:
    """Play EOFUL on raw features and the plain OFUL on them divided by ``divide_by`` (None: EOFUL's own S)."""
    rng = np.random.default_rng(3)
    dim, k = 5, 6
    theta = rng.standard_normal(dim)
    for _ in range(rounds):
        features = 7.0 * rng.standard_normal((k, dim))  # norms of about 15: far from the theory's ||e|| <= 1
        allowed = np.ones(k, dtype=bool)
        observation = {"candidate_embeddings": features, "action_mask": allowed.astype(np.int8)}
        choice = eoful.act(observation, {})
        scale = eoful.scale if divide_by is None else divide_by
        assert choice == plain.choose(features / scale, allowed)
        reward = features[choice] @ theta / 10 + 0.1 * rng.standard_normal()
        eoful.update(observation, reward, {"response_embedding": features[choice]})
        plain.learn(features[choice] / scale, reward)


def task(dim: int = 5) -> Task:
    return Task.from_env(gym.make("TokenizedLinearBandit-v0", embedding_dim=dim, max_length=2), horizon=100)


@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_a_number_divides_every_feature(scale: float) -> None:
    eoful = EOFUL(feature_scale=scale)
    eoful.reset(task())
    play(eoful, PlainLinUCB(5, 2, 1.0, 0.1, 0.05), scale)


def test_first_observation_takes_its_largest_norm_and_keeps_it() -> None:
    eoful = EOFUL(feature_scale="first_observation")
    eoful.reset(task())
    first = np.array([[3.0, 4.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    eoful.act({"candidate_embeddings": first, "action_mask": np.ones(2, dtype=np.int8)}, {})
    assert eoful.scale == 5.0
    eoful.reset(task())  # a new run measures again
    assert eoful.scale is None
    play(eoful, PlainLinUCB(5, 2, 1.0, 0.1, 0.05), None)
    assert eoful.scale > 1.0


def test_scaled_features_keep_the_batched_path_and_the_host_path_equal() -> None:
    rng = np.random.default_rng(0)
    batched, single = EOFUL(feature_scale=8.0), EOFUL(feature_scale=8.0)
    for agent in (batched, single):
        agent.reset(task())
    features = 8.0 * rng.standard_normal((3, 4, 5))
    rewards = rng.standard_normal(3)
    batched.learn(torch.as_tensor(features[:, 0]), torch.as_tensor(rewards))
    for row in range(3):
        single.update({}, float(rewards[row]), {"response_embedding": features[row, 0]})
    assert np.allclose(batched.confidence.theta_hat.numpy(), single.confidence.theta_hat.numpy(), atol=1e-10)
    mask = np.ones((3, 4), dtype=bool)
    chosen = batched.select(features, mask).tolist()
    assert chosen == [single.act({"candidate_embeddings": row, "action_mask": np.ones(4)}, {}) for row in features]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, "unit"])
def test_bad_scales_are_refused_by_value(bad: object) -> None:
    with pytest.raises(ValueError, match="feature_scale"):
        EOFUL(feature_scale=bad)
