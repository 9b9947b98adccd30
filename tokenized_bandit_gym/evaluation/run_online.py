"""The online run loop: one agent learns on one env for T rounds, regret from round 1."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from tokenized_bandit_gym.agent import Agent
from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.task import Task


def run_online(
    env: gym.Env[Any, Any],
    agent: Agent,
    rounds: int,
    seed: int | None = None,
    progress: bool = False,
) -> OnlineResult:
    """Play ``rounds`` episodes of ``env`` with ``agent`` learning online.

    The env is reset with ``seed`` once (seeding its query and noise streams) and unseeded
    after, so two agents run with the same seed see the same queries and noise (common random
    numbers). The agent is reset with ``task = Task.from_env(env, rounds)`` and the same seed.

    Args:
        env: a tokenized bandit env (wrapped or not).
        agent: any object implementing :class:`~tokenized_bandit_gym.agent.Agent`.
        rounds: T >= 1.
        seed: seeds the env streams and the agent.
        progress: show a progress bar over rounds.

    Returns:
        Per-round regret, utility, optimal and oracle-greedy utility, reward and wall time.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    agent.reset(Task.from_env(env, rounds), seed)
    columns = {
        key: np.zeros(rounds)
        for key in ("regret", "utility", "optimal_utility", "oracle_greedy_utility", "reward", "wall_time")
    }
    for round_index in tqdm(range(rounds), disable=not progress, desc=getattr(agent, "name", "agent"), leave=False):
        start = time.perf_counter()
        observation, info = env.reset(seed=seed if round_index == 0 else None)
        terminated = truncated = False
        reward = 0.0
        while not (terminated or truncated):
            action = agent.act(observation, info)
            observation, reward, terminated, truncated, info = env.step(action)
        agent.update(observation, float(reward), info)
        columns["wall_time"][round_index] = time.perf_counter() - start
        columns["reward"][round_index] = reward
        for key in ("regret", "utility", "optimal_utility", "oracle_greedy_utility"):
            columns[key][round_index] = info[key]
    metadata = {
        "env_id": env.spec.id if env.spec is not None else None,
        "agent": getattr(agent, "name", type(agent).__name__),
        "seed": seed,
        "rounds": rounds,
    }
    return OnlineResult(metadata=metadata, **columns)
