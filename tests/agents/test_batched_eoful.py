"""BatchedEOFUL: its ridge algebra, equality with a plain sequential EOFUL, and learning."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401
from agents.batched_eoful import BatchedEOFUL
from agents.random_agent import RandomAgent
from tokenized_bandit_gym.evaluation import run_online, run_online_vector
from tokenized_bandit_gym.evaluation.run_online_vector import vector_task


@pytest.mark.parametrize("refactor_every", [1, 3, 1000])
def test_woodbury_updates_match_the_exact_ridge_solution(refactor_every: int) -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=2, embedding_dim=5)
    agent = BatchedEOFUL(regularization=0.7, refactor_every=refactor_every)
    agent.reset(vector_task(envs, 100), 2)
    rng = np.random.default_rng(0)
    ys, rs = [], []
    for batch in (1, 4, 2, 7, 3):
        y, r = rng.normal(size=(batch, 5)) / 3, rng.normal(size=batch)
        ys.append(y)
        rs.append(r)
        agent.update_batch(np.arange(batch), {}, r, {"response_embedding": y})
    y, r = np.concatenate(ys), np.concatenate(rs)
    gram = 0.7 * np.eye(5) + y.T @ y
    np.testing.assert_allclose(agent._inverse.numpy(), np.linalg.inv(gram), atol=1e-10)
    np.testing.assert_allclose(agent._theta.numpy(), np.linalg.solve(gram, y.T @ r), atol=1e-10)
    assert agent.rounds_learned == len(r)


class _PlainEOFUL:
    """Sequential EOFUL (paper Algorithm 1) written plainly: solve the ridge system every time."""

    name = "plain_eoful"

    def __init__(self, noise_scale: float, horizon: int) -> None:
        self.noise_scale, self.horizon = noise_scale, horizon

    def reset(self, task: Any, seed: int | None = None) -> None:
        self.d, self.length = task.embedding_dim, task.max_length
        self.ys: list[np.ndarray] = []
        self.rs: list[float] = []

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        embeddings = observation["candidate_embeddings"].astype(np.float64)  # (k, d)
        if not self.ys:
            scores = np.zeros(len(embeddings))
        else:
            y = np.array(self.ys)
            gram = np.eye(self.d) + y.T @ y
            theta = np.linalg.solve(gram, y.T @ np.array(self.rs))
            t = len(self.ys) + 1
            beta = self.noise_scale**2 * (
                2 + 4 * self.d * math.log(1 + t * self.length / self.d) + 8 * math.log(4 * self.horizon)
            )
            widths = np.sqrt(np.einsum("kd,kd->k", embeddings, np.linalg.solve(gram, embeddings.T).T))
            scores = embeddings @ theta + math.sqrt(beta) * widths
        scores = np.where(observation["action_mask"].astype(bool), scores, -np.inf)
        return int(np.argmax(scores))

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        self.ys.append(info["response_embedding"].astype(np.float64))
        self.rs.append(reward)


def test_sequential_batched_eoful_equals_plain_eoful() -> None:
    rounds, sigma = 30, 0.1
    vector = gym.make_vec("TokenizedLinearBandit-v0", num_envs=1, noise_scale=sigma)
    batched = run_online_vector(vector, BatchedEOFUL(noise_scale=sigma), rounds, seed=3)
    plain = run_online(gym.make("TokenizedLinearBandit-v0", noise_scale=sigma), _PlainEOFUL(sigma, rounds), rounds, 3)
    np.testing.assert_allclose(batched.utility, plain.utility, atol=1e-12)
    assert len(set(np.round(plain.utility, 9))) > 3  # it explored


def test_batched_eoful_learns() -> None:
    rounds, num_envs = 400, 16
    make = lambda: gym.make_vec("TokenizedLinearBandit-v0", num_envs=num_envs, fixed_length=True)  # noqa: E731
    learner = run_online_vector(make(), BatchedEOFUL(batch_size=num_envs), rounds, seed=0)
    baseline = run_online_vector(make(), RandomAgent, rounds, seed=0)
    last = learner.regret[-rounds // 4 :].mean()
    assert last < 0.3 * baseline.regret.mean()
    assert last < 0.5 * learner.regret[: rounds // 4].mean()


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="regularization must be > 0"):
        BatchedEOFUL(regularization=0.0)
    with pytest.raises(ValueError, match="delta must lie in"):
        BatchedEOFUL(delta=1.0)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        BatchedEOFUL(batch_size=0)
    envs = gym.make_vec("TokenizedMultiArmedBandit-v0", num_envs=2)
    with pytest.raises(ValueError, match="needs a task with embeddings"):
        BatchedEOFUL().reset(vector_task(envs, 10), 2)


def test_torch_backend_actions_stay_tensors() -> None:
    envs = gym.make_vec("TokenizedLinearBandit-v0", num_envs=3, array_backend="torch")
    agent = BatchedEOFUL()
    agent.reset(vector_task(envs, 10), 3)
    observations, infos = envs.reset(seed=0)
    actions = agent.act_batch(observations, infos, torch.ones(3, dtype=torch.bool))
    assert isinstance(actions, torch.Tensor) and actions.shape == (3,)
