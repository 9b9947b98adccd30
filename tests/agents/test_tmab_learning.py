"""Learning tests in the spirit of SB3's identity tests, on a tiny TMAB whose optimum is known.

``TokenizedMultiArmedBandit-v0`` with n = 3, L = 3, ``instance_seed=6`` (DDMC', optimum
``1:1:EOS``, which greedy decoding also finds; gaps about 0.08) and noise sigma = 0.1. The
uniformly random agent's expected regret per round (0.133) is computed exactly by enumeration.
Each learner must average, over the last 20% of 600 rounds, below ``THRESHOLD`` = 0.02 and
below 15% of the random agent's regret. Parameters are scaled to T = 600: the default
``N = T^(2/3) (log T)^(1/3)`` = 133 would not finish exploring two levels (2 n N = 798 > 600)
and UCB radii are set near the noise scale.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from tmab_play import play, random_agent_expected_regret

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents import Agent, list_agents, make

ROUNDS = 600
THRESHOLD = 0.02

LEARNERS: list[tuple[str, dict[str, Any]]] = [
    ("greedy_etc", {"exploration_rounds": 30}),
    ("lookahead_etc", {"lookahead": 2, "exploration_rounds": 20}),
    ("greedy_ucb", {"exploration": 0.1}),
    ("uct", {"exploration": 0.3}),
]


@pytest.fixture(scope="module")
def env() -> gym.Env:
    return gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, instance_seed=6)


@pytest.mark.parametrize(("name", "kwargs"), LEARNERS, ids=[name for name, _ in LEARNERS])
def test_learns_far_below_random(env: gym.Env, name: str, kwargs: dict[str, Any]) -> None:
    random_regret = random_agent_expected_regret(env)
    assert random_regret > 0.1  # the instance is not trivial
    played = play(env, make(name, **kwargs), ROUNDS, seed=0)
    late = played.regrets[-ROUNDS // 5 :].mean()
    assert late < THRESHOLD
    assert late < 0.15 * random_regret
    assert played.regrets.sum() < 0.5 * ROUNDS * random_regret


def test_random_agent_regret_matches_its_expectation(env: gym.Env) -> None:
    """The exact enumeration above agrees with RandomAgent's empirical regret (a check of the helper)."""
    played = play(env, make("random"), 300, seed=0)
    assert abs(played.regrets.mean() - random_agent_expected_regret(env)) < 0.03


@pytest.mark.parametrize("name", ["greedy_etc", "lookahead_etc", "greedy_ucb", "uct"])
def test_registered_under_their_names(name: str) -> None:
    assert name in list_agents()
    agent = make(name)
    assert agent.name == name
    assert isinstance(agent, Agent)


@pytest.mark.parametrize(("name", "kwargs"), LEARNERS, ids=[name for name, _ in LEARNERS])
def test_same_seed_same_actions(name: str, kwargs: dict[str, Any]) -> None:
    env = gym.make("TokenizedMultiArmedBanditRandomTable-v0", vocab_size=3, max_length=3, instance_seed=5)
    small = {**kwargs, "exploration_rounds": 5} if "exploration_rounds" in kwargs else kwargs
    first = play(env, make(name, **small), 60, seed=4)
    second = play(env, make(name, **small), 60, seed=4)
    assert first.actions == second.actions
