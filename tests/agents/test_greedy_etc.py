"""GreedyETC (paper Algorithm 2): the exact exploration schedule, N, commits and argument checks."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from tmab_play import play, utility_of

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents import make
from tokenized_bandit_gym.agents.greedy_etc import GreedyETC, default_exploration_rounds
from tokenized_bandit_gym.task import Task


def reference_greedy_etc(n: int, length: int, eos: int, rounds: int, exploration: int, reward_of) -> list[tuple]:
    """Algorithm 2 written plainly: the list of responses submitted in rounds 1..rounds.

    ``reward_of(round_index, response)`` returns the reward observed for the submission.
    """
    submitted: list[tuple] = []

    def submit(response: tuple) -> float:
        reward = reward_of(len(submitted), response)
        submitted.append(response)
        return reward

    y: tuple = ()
    for _ in range(length):
        if len(y) == length - 1:
            y = (*y, eos)
            break
        averages = []
        for token in range(n):
            response = (*y, token) if token == eos else (*y, token, eos)
            averages.append(np.mean([submit(response) for _ in range(exploration)]))
        best = int(np.argmax(averages))
        y = (*y, best)
        if best == eos:
            break
    while len(submitted) < rounds:
        submitted.append(y)
    return submitted[:rounds]


@pytest.mark.parametrize(("instance_seed", "family"), [(6, "discounted"), (1, "discounted"), (3, "meanpool")])
def test_schedule_is_algorithm_2(instance_seed: int, family: str) -> None:
    env = gym.make(
        "TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=4, family=family, instance_seed=instance_seed
    )
    exploration, rounds = 4, 50
    played = play(env, GreedyETC(exploration_rounds=exploration), rounds, seed=11)
    noise = played.rewards - played.utilities  # the env's noise tape, the same whatever is submitted

    def reward_of(round_index: int, response: tuple) -> float:
        return utility_of(env, response) + noise[round_index]

    expected = reference_greedy_etc(3, 4, 2, rounds, exploration, reward_of)
    assert played.responses == expected
    # each level explores every token N times: the schedule is a multiple of n N long
    exploring = [response for response in played.responses if response != expected[-1]]
    assert len(exploring) % exploration == 0


def test_default_exploration_rounds_formula() -> None:
    for horizon in (2, 10, 1000, 12345, 10**6):
        expected = math.ceil(horizon ** (2 / 3) * math.log(horizon) ** (1 / 3))
        assert default_exploration_rounds(horizon) == expected
    assert default_exploration_rounds(1) == 1
    assert default_exploration_rounds(1000) == 191  # 100 * 6.9078^(1/3) = 190.45, rounded up
    env = gym.make("TokenizedMultiArmedBandit-v0")
    agent = GreedyETC()
    agent.reset(Task.from_env(env, 5000), seed=0)
    assert agent.exploration_rounds == default_exploration_rounds(5000)
    agent = GreedyETC(exploration_rounds=7)
    agent.reset(Task.from_env(env, 5000), seed=0)
    assert agent.exploration_rounds == 7


@pytest.mark.parametrize(("family", "instance_seed"), [("discounted", 0), ("discounted", 1), ("meanpool", 2)])
def test_noise_free_commit_is_oracle_greedy(family: str, instance_seed: int) -> None:
    """Without noise one submission per arm gives the exact u(y:t:EOS): the commit is greedy decoding."""
    env = gym.make("TokenizedMultiArmedBandit-v0", family=family, instance_seed=instance_seed, noise_scale=0.0)
    agent = GreedyETC(exploration_rounds=1)
    problem = env.unwrapped.problem
    levels = problem.max_length - 1
    played = play(env, agent, levels * problem.vocab_size + 2, seed=0)
    greedy = problem.oracle_greedy(torch.zeros(1, dtype=torch.int64)).responses[0].tolist()
    greedy = tuple(greedy[: greedy.index(problem.eos_token_id) + 1])
    assert agent.committed_response == greedy
    assert played.responses[-1] == greedy


def test_committed_response_is_played_forever() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, instance_seed=6)
    agent = GreedyETC(exploration_rounds=5)
    played = play(env, agent, 60, seed=3)
    assert agent.committed_response is not None
    assert played.responses[30:] == [agent.committed_response] * 30


def test_max_length_one_plays_eos_without_exploring() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=1)
    agent = GreedyETC(exploration_rounds=3)
    played = play(env, agent, 3, seed=0)
    assert played.responses == [(2,)] * 3
    assert agent.committed_response == (2,)


def test_fixed_length_needs_a_completion_token() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, fixed_length=True, noise_scale=0.0)
    with pytest.raises(ValueError, match="fixed_length"):
        GreedyETC().reset(Task.from_env(env, 10), seed=0)
    agent = GreedyETC(exploration_rounds=1, completion_token=0)
    played = play(env, agent, 8, seed=0)
    assert all(len(response) == 3 and response[-1] == 2 for response in played.responses)
    assert played.responses[:2] == [(0, 0, 2), (1, 0, 2)]  # level 1 explores t:c:EOS for t != EOS
    assert agent.committed_response is not None and len(agent.committed_response) == 3


def test_runs_on_a_linear_bandit_ignoring_features() -> None:
    env = gym.make("TokenizedLinearBandit-v0", vocab_size=4, max_length=3, embedding_dim=4)
    played = play(env, make("greedy_etc", exploration_rounds=2), 20, seed=0)
    assert len(played.responses) == 20


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_exploration_rounds_raise(bad: int) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        GreedyETC(exploration_rounds=bad)


def test_bad_arguments_raise() -> None:
    with pytest.raises(TypeError, match="2.5"):
        GreedyETC(exploration_rounds=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="-1"):
        GreedyETC(completion_token=-1)
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=3, fixed_length=True)
    with pytest.raises(ValueError, match="completion_token"):
        GreedyETC(completion_token=2).reset(Task.from_env(env, 10), seed=0)  # EOS cannot pad
    with pytest.raises(ValueError, match="before reset"):
        GreedyETC().act(env.reset(seed=0)[0], {})
