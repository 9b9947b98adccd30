"""GreedyUCB: per-level UCB sampling, confident commit, GreedyETC's budget as a cap, determinism."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from tmab_play import play

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents.greedy_ucb import GreedyUCB
from tokenized_bandit_gym.task import Task


def test_commits_at_the_cap_when_never_confident() -> None:
    """With a huge radius no arm is ever separated: each level ends after n N rounds, on the most-played arm."""
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, instance_seed=6)
    agent = GreedyUCB(exploration=1e6, exploration_rounds=4)
    played = play(env, agent, 30, seed=0)
    first_level = played.responses[:12]
    assert {response[:1] for response in first_level} == {(0,), (1,), (2,)}
    assert all(response[:1] == agent.committed_response[:1] for response in played.responses[12:])
    assert agent.committed_response is not None
    assert played.responses[-1] == agent.committed_response


def test_noise_free_commits_early_to_greedy_decoding() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", instance_seed=1, noise_scale=0.0)
    problem = env.unwrapped.problem
    agent = GreedyUCB(exploration=1e-9, exploration_rounds=100)  # radius far below every gap
    played = play(env, agent, 45, seed=0)
    greedy = problem.oracle_greedy(torch.zeros(1, dtype=torch.int64)).responses[0].tolist()
    greedy = tuple(greedy[: greedy.index(problem.eos_token_id) + 1])
    assert agent.committed_response == greedy
    exploring = sum(response != greedy for response in played.responses)
    assert exploring < (problem.max_length - 1) * problem.vocab_size  # one round per arm, not GreedyETC's n N


def test_fixed_length_raises() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, fixed_length=True)
    with pytest.raises(ValueError, match="fixed_length"):
        GreedyUCB().reset(Task.from_env(env, 10), seed=0)


@pytest.mark.parametrize(("keyword", "bad"), [("exploration", 0.0), ("exploration", -1.0), ("exploration_rounds", 0)])
def test_bad_arguments_raise(keyword: str, bad: float) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        GreedyUCB(**{keyword: bad})
