"""Play several (agent, seed) runs as the rows of one vector env: one forward of all their candidates per step.

On an LLM id a step's cost is the forward of every row's k candidates over its cache. Playing the runs of a
reproduction one after the other forwards k rows at a time, which uses a CPU's matrix multiply poorly; playing
them as the rows of the native vector env (``gym.make_vec``) forwards all their candidates at once, and rows
that start a round on the same query share its prefill. Row i is the single env reset with its run's seed and
played by its own agent, reset with the same seed: what ``run_online(single env, agent, T, seed)`` plays, to
float rounding (the batched forward sums in another order).

The env computes a query's oracle-greedy benchmark when a round on it ends, one query at a time (k candidate
rows per forward). The queries of rounds ``1..T`` of a seed are known in advance
(:class:`~tokenized_bandit_gym.core.round_streams.RoundStreams`, the streams the env draws them from), so
:func:`warm_benchmarks` decodes them first, many queries per forward; the runs then find them cached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

RoundsEnded = Callable[[np.ndarray, np.ndarray, dict[str, Any], dict[str, Any]], None]
"""Called as ``(ended, played, observations, final)`` after each step where rows ended a round: ``ended``, the
rows' indices ``(E,)``; ``played``, the rounds recorded per row so far ``(N,)`` (these included);
``observations`` and ``final``, the step's observation and info entries of the ended rows (``(E, ...)``)."""


def queries_of_runs(env: Any, seeds: Sequence[int], rounds: int) -> list[int]:
    """The distinct query indices of rounds ``1..rounds`` of the env's streams seeded with ``seeds`` (sorted).

    Args:
        env: an LLM env or vector env (wrapped or not) whose ``unwrapped`` has ``problem`` and ``noise_model``.
        seeds: the reset seeds of the runs.
        rounds: T.
    """
    from tokenized_bandit_gym.core.round_streams import RoundStreams

    base = env.unwrapped
    drawn = [
        RoundStreams.from_seed(seed).draw_many(base.problem.num_queries, base.noise_model, rounds)[0] for seed in seeds
    ]
    return sorted({int(query) for stream in drawn for query in stream})


def warm_benchmarks(env: Any, seeds: Sequence[int], rounds: int, chunk: int, progress: bool = True) -> None:
    """Decode the oracle-greedy benchmark of every query the runs of ``seeds`` will meet, ``chunk`` queries at once.

    Queries already cached are skipped. ``chunk * k`` candidate rows go through each forward.

    Args:
        env: an LLM env or vector env.
        seeds: the reset seeds of the runs.
        rounds: T.
        chunk: queries decoded together (>= 1).
        progress: show a progress bar.

    Raises:
        ValueError: ``chunk`` < 1.
    """
    import torch

    from tokenized_bandit_gym.evaluation.progress import ProgressCounter

    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk (queries decoded together) must be a positive integer, got {chunk!r}")
    problem = env.unwrapped.problem
    queries = [query for query in queries_of_runs(env, seeds, rounds) if not problem.has_oracle_greedy(query)]
    bar = ProgressCounter(len(queries), "oracle greedy, every query ahead", "benchmark", enabled=progress, leave=False)
    for start in range(0, len(queries), chunk):
        part = queries[start : start + chunk]
        problem.oracle_greedy(torch.tensor(part, device=problem.device))
        bar.update(len(part))
    bar.close()


def play_rows(
    env: Any,
    agents: Sequence[Any],
    seeds: Sequence[int],
    rounds: int,
    label: str = "rows",
    on_rounds_ended: RoundsEnded | None = None,
    progress: bool = True,
) -> np.ndarray:
    """Play ``rounds`` rounds of each row of the vector env ``env``, row i by ``agents[i]`` from ``seeds[i]``.

    Each agent is reset here with the env's task and its row's seed. Rows that reach T early keep playing,
    unrecorded and untaught, until every row has played T rounds.

    Args:
        env: a native vector env with ``len(agents)`` sub-envs (``gym.make_vec``).
        agents: one :class:`~tokenized_bandit_gym.agent.Agent` per row.
        seeds: one reset seed per row.
        rounds: T >= 1.
        label: the progress bar's label.
        on_rounds_ended: see :data:`RoundsEnded` (e.g. to keep each round's response).
        progress: show a progress bar over the rows' rounds.

    Returns:
        The per-round regret of each row, ``(N, T)``.

    Raises:
        ValueError: ``agents`` and ``seeds`` do not have one entry per row, or ``rounds`` < 1.
    """
    from tokenized_bandit_gym.evaluation.progress import ProgressCounter
    from tokenized_bandit_gym.evaluation.run_online_vector import vector_task
    from tokenized_bandit_gym.independent_agents import IndependentAgents

    num_rows = int(env.num_envs)
    if len(agents) != num_rows or len(seeds) != num_rows:
        raise ValueError(
            f"one agent and one seed per row: the env has {num_rows} rows, "
            f"got {len(agents)} agents and {len(seeds)} seeds"
        )
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    task = vector_task(env, rounds)
    for agent, seed in zip(agents, seeds, strict=True):
        agent.reset(task, seed)
    rows = IndependentAgents(lambda: agents[0])
    rows.agents = list(agents)  # row i's own agent, reset above with its own seed
    regret = np.zeros((num_rows, rounds))  # (N, T)
    played = np.zeros(num_rows, dtype=np.int64)  # (N,) rounds recorded per row
    observations, infos = env.reset(seed=list(seeds))
    needs_action = np.ones(num_rows, dtype=bool)
    bar = ProgressCounter(num_rows * rounds, label, "round", enabled=progress, leave=False)
    while played.min() < rounds:
        actions = rows.act_batch(observations, infos, needs_action)
        observations, rewards, terminated, _, infos = env.step(actions)
        needs_action = ~terminated
        ended = np.flatnonzero(terminated & (played < rounds))  # rows past T play on unrecorded, untaught
        if ended.size == 0:
            continue
        final = {
            key: value[ended]
            for key, value in infos.items()
            if not key.startswith("_") and bool(np.asarray(infos[f"_{key}"])[ended].all())
        }
        ended_observations = {key: value[ended] for key, value in observations.items()}
        rows.update_batch(ended, ended_observations, rewards[ended], final)
        regret[ended, played[ended]] = final["regret"]
        played[ended] += 1
        bar.update(int(ended.size))
        if on_rounds_ended is not None:
            on_rounds_ended(ended, played, ended_observations, final)
    bar.close()
    return regret
