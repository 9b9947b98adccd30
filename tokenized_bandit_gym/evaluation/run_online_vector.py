"""The online run loop on a vector env: N rounds decoded at once, T rounds recorded in all."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from tokenized_bandit_gym.agent import Agent, check_feedback
from tokenized_bandit_gym.batched_agent import BatchedAgent
from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.evaluation.progress import ProgressCounter
from tokenized_bandit_gym.host_array import as_host_array
from tokenized_bandit_gym.independent_agents import IndependentAgents
from tokenized_bandit_gym.task import Task, check_horizon

RECORDED = ("regret", "utility", "optimal_utility", "oracle_greedy_utility")


def vector_task(vector_env: gym.vector.VectorEnv, horizon: int) -> Task:
    """Describe one sub-env of ``vector_env`` (wrapped or not) for an agent playing ``horizon`` rounds."""
    check_horizon(horizon)
    base = vector_env.unwrapped
    problem = getattr(base, "problem", None)
    if problem is None:
        raise TypeError(f"{base!r} is not a tokenized bandit vector env (it has no .problem)")
    action_space = base.single_action_space
    if not isinstance(action_space, spaces.Discrete):
        raise TypeError(f"{base!r} is not a tokenized bandit vector env (its actions are {action_space}, not Discrete)")
    return Task.of_problem(problem, vector_env.spec, base, base.single_observation_space, action_space, horizon)


def _as_batched_agent(agent: object) -> BatchedAgent:
    """``agent`` itself, or N independent copies when it is a factory (or class) of Agents."""
    if isinstance(agent, type):
        if hasattr(agent, "act_batch"):
            raise TypeError(f"pass a BatchedAgent instance, not the class {agent.__name__}")
        return IndependentAgents(agent)
    if isinstance(agent, BatchedAgent):
        return agent
    if isinstance(agent, Agent) or not callable(agent):
        raise TypeError(
            "agent must be a BatchedAgent or a zero-argument factory of Agents "
            f"(e.g. RandomAgent or lambda: tokenized_bandit_gym.agents.make('random')), got {agent!r}"
        )
    return IndependentAgents(agent)


def run_online_vector(
    vector_env: gym.vector.VectorEnv,
    agent: BatchedAgent | Callable[[], Agent],
    rounds: int,
    seed: int | None = None,
    progress: bool = False,
) -> OnlineResult:
    """Play until ``rounds`` rounds have ended on ``vector_env``, the agent learning online.

    The vector env is reset once with ``seed`` (sub-env i gets ``seed + i``) and autoresets
    after (NEXT_STEP). Rounds are recorded in the order they end (by step, then by sub-env
    index) and the record stops at exactly T = ``rounds``; rounds that end in the same last
    step beyond T still reach the agent's update but are not recorded. Sub-env i with an
    :class:`~tokenized_bandit_gym.independent_agents.IndependentAgents` copy seeded
    ``seed + i`` plays exactly what ``run_online`` plays on a single env with that seed.

    Args:
        vector_env: a tokenized bandit vector env with NEXT_STEP autoreset (wrapped or not).
        agent: a :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent`, or a factory of
            per-round :class:`~tokenized_bandit_gym.agent.Agent` s (zero-argument callable),
            which runs as N independent copies.
        rounds: T >= 1, rounds recorded over all sub-envs together.
        seed: seeds the env streams and the agent.
        progress: show a progress bar over rounds.

    Returns:
        Per-round regret, utilities, reward and wall time (the time of the steps since the
        previous rounds ended, shared among the rounds ending now), with ``metadata["env_index"]``
        ``(T,)`` the sub-env of each round and ``metadata["num_envs"]``.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    mode = vector_env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.NEXT_STEP:
        raise ValueError(f"run_online_vector needs a vector env with AutoresetMode.NEXT_STEP, got {mode!r}")
    agent = _as_batched_agent(agent)
    num_envs = vector_env.num_envs
    task = vector_task(vector_env, rounds)
    if not isinstance(agent, IndependentAgents):  # IndependentAgents checks its copies
        check_feedback(agent, task)
    agent.reset(task, num_envs, seed)
    columns = {key: np.zeros(rounds) for key in (*RECORDED, "reward", "wall_time")}
    env_index = np.zeros(rounds, dtype=np.int64)
    observations, infos = vector_env.reset(seed=seed)
    needs_action: Any = np.ones(num_envs, dtype=bool)
    if isinstance(observations["action_mask"], torch.Tensor):
        needs_action = torch.as_tensor(needs_action, device=observations["action_mask"].device)
    recorded = 0
    bar = ProgressCounter(rounds, getattr(agent, "name", "agent"), "round", enabled=progress, leave=False)
    start = time.perf_counter()
    while recorded < rounds:
        actions = agent.act_batch(observations, infos, needs_action)
        observations, rewards, terminated, _, infos = vector_env.step(actions)
        ended = as_host_array(terminated)
        needs_action = ~terminated
        if not ended.any():
            continue
        rows_host = np.flatnonzero(ended)
        rows: Any = rows_host
        if isinstance(terminated, torch.Tensor):
            rows = torch.as_tensor(rows_host, device=terminated.device)
        final_infos = {  # NumPy arrays (the LLM envs' text) are indexed on the host whatever the backend
            key: value if isinstance(value, str) else value[rows_host if isinstance(value, np.ndarray) else rows]
            for key, value in infos.items()
            if not key.startswith("_") and bool(as_host_array(infos[f"_{key}"])[rows_host].all())
        }
        agent.update_batch(rows, {key: value[rows] for key, value in observations.items()}, rewards[rows], final_infos)
        take = min(rows_host.size, rounds - recorded)
        window = slice(recorded, recorded + take)
        for key in RECORDED:
            columns[key][window] = as_host_array(final_infos[key])[:take]
        columns["reward"][window] = as_host_array(rewards[rows])[:take]
        now = time.perf_counter()
        columns["wall_time"][window] = (now - start) / rows_host.size
        start = now
        env_index[window] = rows_host[:take]
        recorded += take
        bar.update(take)
    bar.close()
    spec = vector_env.spec
    metadata = {
        "env_id": spec.id if spec is not None else None,
        "agent": getattr(agent, "name", type(agent).__name__),
        "seed": seed,
        "rounds": rounds,
        "num_envs": num_envs,
        "env_index": env_index,
    }
    return OnlineResult(metadata=metadata, **columns)
