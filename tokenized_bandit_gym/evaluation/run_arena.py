"""Play several agents head to head in the PettingZoo arena, each learning online, regret from round 1."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena
from tokenized_bandit_gym.agent import Agent
from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.task import Task

_COLUMNS = ("regret", "utility", "optimal_utility", "oracle_greedy_utility", "reward", "wall_time")


def run_arena(
    arena: TokenizedBanditArena,
    agents: Mapping[str, Agent],
    rounds: int,
    seed: int | None = None,
) -> dict[str, OnlineResult]:
    """Play ``rounds`` rounds of ``arena``, every agent answering the same query with the same noise.

    The arena is reset with ``seed`` once and unseeded after, and every agent is reset with the
    same ``seed``, so each agent's result equals what ``run_online(env, agent, rounds, seed)``
    gives it alone on the arena's env; side by side, the differences between agents come only
    from their own choices (common random numbers). ``wall_time`` is the agent's own time in
    ``act``/``update`` per round.

    Args:
        arena: the arena; its ``possible_agents`` must be exactly the keys of ``agents``.
        agents: name -> agent.
        rounds: T >= 1.
        seed: seeds the arena's streams and every agent.

    Returns:
        name -> per-round results.

    Raises:
        ValueError: ``rounds`` is not a positive integer, or the names do not match.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if sorted(agents) != sorted(arena.possible_agents):
        raise ValueError(f"agents {sorted(agents)} must match the arena's players {sorted(arena.possible_agents)}")
    for agent in agents.values():
        task = Task.from_env(arena.env, rounds)  # every player's shell is a copy of the arena's env
        agent.reset(task, seed)
    columns = {name: {key: np.zeros(rounds) for key in _COLUMNS} for name in agents}
    for round_index in range(rounds):
        observations, infos = arena.reset(seed=seed if round_index == 0 else None)
        while arena.agents:
            actions = {}
            for name in arena.agents:
                start = time.perf_counter()
                actions[name] = agents[name].act(observations[name], infos[name])
                columns[name]["wall_time"][round_index] += time.perf_counter() - start
            observations, rewards, terminations, truncations, infos = arena.step(actions)
            for name in actions:
                if not (terminations[name] or truncations[name]):
                    continue
                start = time.perf_counter()
                agents[name].update(observations[name], float(rewards[name]), infos[name])
                record = columns[name]
                record["wall_time"][round_index] += time.perf_counter() - start
                record["reward"][round_index] = rewards[name]
                for key in ("regret", "utility", "optimal_utility", "oracle_greedy_utility"):
                    record[key][round_index] = infos[name][key]
    return {
        name: OnlineResult(
            metadata={"env_id": arena.env_id, "agent": getattr(agent, "name", name), "seed": seed, "rounds": rounds},
            **columns[name],
        )
        for name, agent in agents.items()
    }
