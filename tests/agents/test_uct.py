"""UCT over the token tree: expansion order, backup, exact optimum without DDMC, determinism."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
import torch
from tmab_play import play

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents.uct import UCT


def test_every_child_is_tried_before_any_is_repeated() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, instance_seed=6)
    played = play(env, UCT(), 3, seed=0)
    assert sorted(response[0] for response in played.responses) == [0, 1, 2]


def test_backup_counts_every_edge_of_the_path() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, instance_seed=6)
    agent = UCT()
    played = play(env, agent, 50, seed=2)
    root = agent.counts[()]
    assert sum(root.values()) == 50
    for token, count in root.items():
        assert count == sum(response[0] == token for response in played.responses)
        assert math.isclose(
            agent.sums[()][token],
            sum(r for r, response in zip(played.rewards, played.responses, strict=True) if response[0] == token),
        )


def test_finds_the_exact_optimum_without_ddmc() -> None:
    env = gym.make("TokenizedMultiArmedBanditRandomTable-v0", vocab_size=3, max_length=3, instance_seed=5)
    problem = env.unwrapped.problem
    optimum = problem.optimal(torch.zeros(1, dtype=torch.int64)).responses[0].tolist()
    optimum = tuple(optimum[: optimum.index(problem.eos_token_id) + 1])
    agent = UCT(exploration=0.5)
    played = play(env, agent, 400, seed=0)
    assert agent.best_response() == optimum
    assert sum(response == optimum for response in played.responses[-80:]) >= 70


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan")])
def test_bad_exploration_raises(bad: float) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        UCT(exploration=bad)
