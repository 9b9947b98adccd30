"""The TMAB agents act through ``candidate_tokens``: a permuted candidate list changes nothing in token space."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tmab_play import play

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents import make


class PermutedCandidates(gym.Wrapper):
    """Action ``i`` appends token ``order[i]``; the observation lists the candidates in that order."""

    def __init__(self, env: gym.Env[Any, Any], order: np.ndarray) -> None:
        super().__init__(env)
        self.order = order

    def _permute(self, observation: dict[str, Any]) -> dict[str, Any]:
        observation = dict(observation)
        observation["candidate_tokens"] = self.order.copy()
        observation["action_mask"] = observation["action_mask"][self.order]
        return observation

    def reset(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return self._permute(observation), info

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(int(self.order[action]))
        return self._permute(observation), reward, terminated, truncated, info


@pytest.mark.parametrize(
    ("name", "kwargs"), [("greedy_etc", {"exploration_rounds": 1}), ("greedy_ucb", {"exploration": 1e-9})]
)
def test_noise_free_commit_is_oracle_greedy_under_a_permutation(name: str, kwargs: dict[str, Any]) -> None:
    base = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=5, max_length=4, instance_seed=2, noise_scale=0.0)
    problem = base.unwrapped.problem
    env = PermutedCandidates(base, np.array([3, 0, 4, 2, 1]))
    agent = make(name, **kwargs)
    played = play(env, agent, 3 * 5 + 2, seed=0)
    greedy = problem.oracle_greedy(torch.zeros(1, dtype=torch.int64)).responses[0].tolist()
    greedy = tuple(greedy[: greedy.index(problem.eos_token_id) + 1])
    assert agent.committed_response == greedy
    assert played.responses[-1] == greedy
    assert played.responses[0] == (3, 4)  # the first candidate (token 3), then EOS (token 4)


def test_uct_expands_in_token_space_under_a_permutation() -> None:
    base = gym.make("TokenizedMultiArmedBanditRandomTable-v0", vocab_size=3, max_length=3, instance_seed=5)
    env = PermutedCandidates(base, np.array([2, 0, 1]))
    agent = make("uct")
    played = play(env, agent, 20, seed=0)
    assert set(agent.counts[()]) == {0, 1, 2}
    assert sum(agent.counts[()].values()) == 20
    assert all(response[-1] == 2 for response in played.responses)
