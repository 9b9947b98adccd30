"""k-LookaheadETC (paper appendix B): k = 1 is GreedyETC, block arms, exact optimum without DDMC."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from tmab_play import play

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym.agents.greedy_etc import GreedyETC
from tokenized_bandit_gym.agents.lookahead_etc import LookaheadETC
from tokenized_bandit_gym.task import Task


def test_lookahead_one_is_greedy_etc_round_for_round() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=4, instance_seed=6)
    greedy = play(env, GreedyETC(exploration_rounds=3), 40, seed=5)
    lookahead = play(env, LookaheadETC(lookahead=1, exploration_rounds=3), 40, seed=5)
    assert lookahead.actions == greedy.actions


def test_first_level_explores_each_distinct_block_response_n_times() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=4, instance_seed=6)
    agent = LookaheadETC(lookahead=2, exploration_rounds=2)
    played = play(env, agent, 14, seed=0)
    # EOS-free w with |w| <= 2 over {0, 1}, as blocks w:EOS.. in lexicographic order, N = 2 each
    blocks = [(0, 0, 2), (0, 1, 2), (0, 2), (1, 0, 2), (1, 1, 2), (1, 2), (2,)]
    assert played.responses == [block for block in blocks for _ in range(2)]


def test_block_shrinks_near_max_length() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=2, noise_scale=0.0)
    agent = LookaheadETC(lookahead=3, exploration_rounds=1)
    played = play(env, agent, 4, seed=0)
    assert played.responses[:3] == [(0, 2), (1, 2), (2,)]
    assert agent.committed_response == played.responses[3]


def test_finds_the_exact_optimum_without_ddmc() -> None:
    """On a random table (no DDMC) 2-lookahead with L = 3 explores every response and finds the optimum."""
    env = gym.make("TokenizedMultiArmedBanditRandomTable-v0", vocab_size=3, max_length=3, instance_seed=5)
    problem = env.unwrapped.problem
    optimum = problem.optimal(torch.zeros(1, dtype=torch.int64)).responses[0].tolist()
    optimum = tuple(optimum[: optimum.index(problem.eos_token_id) + 1])
    greedy = GreedyETC(exploration_rounds=20)
    lookahead = LookaheadETC(lookahead=2, exploration_rounds=20)
    play(env, greedy, 7 * 20 + 1, seed=1)
    played = play(env, lookahead, 7 * 20 + 1, seed=1)
    assert lookahead.committed_response == optimum
    assert played.regrets[-1] == 0.0
    # greedy decoding commits to EOS here (u(EOS) beats every u(t:EOS)), 0.21 below the optimum
    assert greedy.committed_response == (problem.eos_token_id,) != optimum


def test_fixed_length_needs_a_completion_token() -> None:
    env = gym.make("TokenizedMultiArmedBandit-v0", vocab_size=3, max_length=4, fixed_length=True, noise_scale=0.0)
    with pytest.raises(ValueError, match="fixed_length"):
        LookaheadETC().reset(Task.from_env(env, 10), seed=0)
    agent = LookaheadETC(lookahead=2, exploration_rounds=1, completion_token=1)
    played = play(env, agent, 10, seed=0)
    assert played.responses[:4] == [(0, 0, 1, 2), (0, 1, 1, 2), (1, 0, 1, 2), (1, 1, 1, 2)]
    assert all(len(response) == 4 for response in played.responses)


@pytest.mark.parametrize(("keyword", "bad"), [("lookahead", 0), ("exploration_rounds", 0), ("completion_token", -2)])
def test_bad_arguments_raise(keyword: str, bad: int) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        LookaheadETC(**{keyword: bad})
