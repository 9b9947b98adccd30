"""Test helpers for the TMAB agents: a recording run loop and the random agent's exact regret."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from tokenized_bandit_gym.agent import Agent
from tokenized_bandit_gym.task import Task


@dataclass
class Played:
    """What happened in each round: the submitted response, its reward, utility and regret."""

    responses: list[tuple[int, ...]]
    actions: list[list[int]]
    rewards: np.ndarray
    utilities: np.ndarray
    regrets: np.ndarray


def play(env: gym.Env[Any, Any], agent: Agent, rounds: int, seed: int) -> Played:
    """Run ``agent`` online for ``rounds`` episodes (as ``run_online`` does) and record responses."""
    agent.reset(Task.from_env(env, rounds), seed)
    responses, actions, rewards, utilities, regrets = [], [], [], [], []
    for round_index in range(rounds):
        observation, info = env.reset(seed=seed if round_index == 0 else None)
        terminated, reward, taken = False, 0.0, []
        while not terminated:
            action = agent.act(observation, info)
            taken.append(action)
            observation, reward, terminated, _, info = env.step(action)
        agent.update(observation, float(reward), info)
        responses.append(tuple(int(token) for token in info["response"][: info["response_length"]]))
        actions.append(taken)
        rewards.append(reward)
        utilities.append(info["utility"])
        regrets.append(info["regret"])
    return Played(responses, actions, np.array(rewards), np.array(utilities), np.array(regrets))


def utility_of(env: gym.Env[Any, Any], response: tuple[int, ...]) -> float:
    """The true utility of a complete response (padded with EOS to length L)."""
    problem = env.unwrapped.problem
    padded = list(response) + [problem.eos_token_id] * (problem.max_length - len(response))
    return float(problem.utility(torch.zeros(1, dtype=torch.int64), torch.tensor([padded]))[0])


def random_agent_expected_regret(env: gym.Env[Any, Any]) -> float:
    """Exact expected regret per round of uniform decoding over allowed tokens (early EOS allowed)."""
    problem = env.unwrapped.problem
    n, length, eos = problem.vocab_size, problem.max_length, problem.eos_token_id
    optimum = float(problem.optimal(torch.zeros(1, dtype=torch.int64)).utility[0])
    expected = 0.0
    stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    while stack:
        prefix, probability = stack.pop()
        if len(prefix) == length - 1:
            expected += probability * utility_of(env, (*prefix, eos))
            continue
        for token in range(n):
            if token == eos:
                expected += probability / n * utility_of(env, (*prefix, eos))
            else:
                stack.append(((*prefix, token), probability / n))
    return optimum - expected
