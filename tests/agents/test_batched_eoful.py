"""BatchedEOFUL: sequential equality with EOFUL, batch semantics, learning, backends."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym.agents.batched_eoful import BatchedEOFUL
from tokenized_bandit_gym.agents.eoful import EOFUL
from tokenized_bandit_gym.agents.random_agent import RandomAgent
from tokenized_bandit_gym.evaluation import run_online, run_online_vector
from tokenized_bandit_gym.evaluation.run_online_vector import vector_task


def test_one_sub_env_batch_of_one_is_sequential_eoful() -> None:
    rounds = 30
    vector = gym.make_vec("TokenizedLinearBandit-v0", num_envs=1)
    batched = run_online_vector(vector, BatchedEOFUL(), rounds, seed=3)
    sequential = run_online(gym.make("TokenizedLinearBandit-v0"), EOFUL(), rounds, seed=3)
    np.testing.assert_array_equal(batched.utility, sequential.utility)
    assert len(set(np.round(sequential.utility, 9))) > 3  # it explored


def test_updates_wait_for_a_full_batch() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2, embedding_dim=4)
    agent = BatchedEOFUL(batch_size=5)
    agent.reset(vector_task(envs, 100), 2)
    rng = np.random.default_rng(0)
    learned = []
    for batch in (2, 2, 3, 1, 4):
        agent.update_batch(
            np.arange(batch), {}, rng.normal(size=batch), {"response_embedding": rng.normal(size=(batch, 4))}
        )
        learned.append(agent.confidence.rounds)
    assert learned == [0, 0, 7, 7, 12]


def test_batched_eoful_learns() -> None:
    rounds, num_envs = 400, 16
    make = lambda: gym.make_vec("TokenizedLinearBandit-v0", num_envs=num_envs, fixed_length=True)  # noqa: E731
    learner = run_online_vector(make(), BatchedEOFUL(batch_size=num_envs), rounds, seed=0)
    baseline = run_online_vector(make(), RandomAgent, rounds, seed=0)
    last = learner.regret[-rounds // 4 :].mean()
    assert last < 0.3 * baseline.regret.mean()
    assert last < 0.5 * learner.regret[: rounds // 4].mean()


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        BatchedEOFUL(batch_size=0)
    with pytest.raises(ValueError, match="used before reset"):
        BatchedEOFUL().update_batch(np.arange(1), {}, np.zeros(1), {"response_embedding": np.zeros((1, 16))})
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=2)
    with pytest.raises(ValueError, match="needs candidate embeddings"):
        BatchedEOFUL().reset(vector_task(envs, 10), 2)


def test_torch_backend_actions_stay_tensors() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=3, array_backend="torch")
    agent = BatchedEOFUL()
    agent.reset(vector_task(envs, 10), 3)
    observations, infos = envs.reset(seed=0)
    actions = agent.act_batch(observations, infos, torch.ones(3, dtype=torch.bool))
    assert isinstance(actions, torch.Tensor) and actions.shape == (3,)
    envs.step(actions)
