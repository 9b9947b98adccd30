"""The online run loop: one agent learns on one env for T rounds, regret from round 1."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from tokenized_bandit_gym.agent import Agent, check_feedback
from tokenized_bandit_gym.batched_agent import BatchedAgent
from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.evaluation.progress import ProgressCounter
from tokenized_bandit_gym.evaluation.run_online_vector import run_online_vector
from tokenized_bandit_gym.task import Task


def run_online(
    env: gym.Env[Any, Any] | gym.vector.VectorEnv,
    agent: Agent | BatchedAgent | Callable[[], Agent],
    rounds: int,
    seed: int | None = None,
    progress: bool = False,
) -> OnlineResult:
    """Play ``rounds`` episodes of ``env`` with ``agent`` learning online.

    The env is reset with ``seed`` once (seeding its query and noise streams) and unseeded
    after, so two agents run with the same seed see the same queries and noise (common random
    numbers). The agent is reset with ``task = Task.from_env(env, rounds)`` and the same seed.

    Given a vector env (``gym.make_vec``), this is
    :func:`~tokenized_bandit_gym.evaluation.run_online_vector.run_online_vector`: N rounds decoded
    at once, a :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent` updated per batch of
    finished rounds (or N independent copies from a factory of agents).

    Args:
        env: a tokenized bandit env or vector env (wrapped or not).
        agent: an :class:`~tokenized_bandit_gym.agent.Agent` (single env), or what
            ``run_online_vector`` takes (vector env).
        rounds: T >= 1.
        seed: seeds the env streams and the agent.
        progress: show a progress bar over rounds.

    Returns:
        Per-round regret, utility, optimal and oracle-greedy utility, reward and wall time.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if isinstance(env, gym.vector.VectorEnv):
        # A single Agent is refused there, with the error naming what a vector env takes.
        vector_agent = cast("BatchedAgent | Callable[[], Agent]", agent)
        return run_online_vector(env, vector_agent, rounds, seed=seed, progress=progress)
    if not callable(getattr(agent, "act", None)):
        raise TypeError(
            f"a single env needs an Agent (act/update/reset), got {agent!r}; "
            "BatchedAgents and agent factories play a vector env (gym.make_vec)"
        )
    agent = cast(Agent, agent)
    task = Task.from_env(env, rounds)
    check_feedback(agent, task)
    agent.reset(task, seed)
    columns = {
        key: np.zeros(rounds)
        for key in ("regret", "utility", "optimal_utility", "oracle_greedy_utility", "reward", "wall_time")
    }
    bar = ProgressCounter(rounds, getattr(agent, "name", "agent"), "round", enabled=progress, leave=False)
    act, step, clock = agent.act, env.step, time.perf_counter  # looked up once, called every step
    from_info = [(key, columns[key]) for key in ("regret", "utility", "optimal_utility", "oracle_greedy_utility")]
    for round_index in range(rounds):
        start = clock()
        observation, info = env.reset(seed=seed if round_index == 0 else None)
        terminated = truncated = False
        reward: SupportsFloat = 0.0
        while not (terminated or truncated):
            observation, reward, terminated, truncated, info = step(act(observation, info))
        agent.update(observation, float(reward), info)
        columns["wall_time"][round_index] = clock() - start
        columns["reward"][round_index] = reward
        for key, column in from_info:
            column[round_index] = info[key]
        if progress:  # (a hidden counter's count is never read)
            bar.update(1)
    bar.close()
    metadata = {
        "env_id": env.spec.id if env.spec is not None else None,
        "agent": getattr(agent, "name", type(agent).__name__),
        "seed": seed,
        "rounds": rounds,
    }
    return OnlineResult(metadata=metadata, **columns)
