"""OracleGreedy plays exactly the env's greedy benchmark, and each token is the greedy choice."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.registration import SYNTHETIC_ENVS
from tokenized_bandit_gym.task import Task

SYNTHETIC_IDS = [env_id for env_id in tokenized_bandit_gym.registered_ids() if env_id in SYNTHETIC_ENVS]


@pytest.mark.parametrize("env_id", SYNTHETIC_IDS)
def test_each_token_maximises_the_true_utility_and_matches_the_benchmark(env_id: str) -> None:
    env = gym.make(env_id)
    problem = env.unwrapped.problem
    agent = agents.make("oracle_greedy")
    agent.reset(Task.from_env(env, 10))
    for round_index in range(10):
        observation, info = env.reset(seed=3 if round_index == 0 else None)
        terminated = False
        while not terminated:
            action = agent.act(observation, info)
            length = int(observation["length"])
            query = torch.tensor([info["query_index"]])
            state = problem.state_for(query, torch.as_tensor(observation["response"][None, :length]))
            scores = problem.candidate_utilities(state)[0].masked_fill(~problem.action_mask(state)[0], -np.inf)
            assert float(scores[action]) == float(scores.max())
            observation, _, terminated, _, info = env.step(action)
        assert info["utility"] == info["oracle_greedy_utility"]
