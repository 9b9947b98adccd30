"""Play several (agent, seed) runs as the rows of one vector env: one forward of all their candidates per step.

On an LLM id a step's cost is the forward of every row's k candidates over its cache. Playing the runs of a
reproduction one after the other forwards k rows at a time, which uses a CPU's matrix multiply poorly; playing
them as the rows of the native vector env (``gym.make_vec``) forwards all their candidates at once, rows
that start a round on the same query share its prefill, and rows that are still the same partial response
(agents whose choices have not parted) share one forward of their candidates. Row i is the single env reset
with its run's seed and played by its own agent, reset with the same seed: what ``run_online(single env, agent,
T, seed)`` plays, to float rounding (the batched forward sums in another order).

Each round's oracle-greedy benchmark is decoded by rows of the same forward: when every row starts a round
together (fixed lengths), each query not benchmarked yet gets one more row that decodes greedily with the true
utility (:class:`~tokenized_bandit_gym.envs.language_model_round_batch.LanguageModelRoundBatch`), and a run
that chooses as greedy does is that row. Where rows restart apart (free lengths), a query's benchmark is
decoded on its own when a round on it ends; the queries of rounds ``1..T`` of a seed are known in advance
(:class:`~tokenized_bandit_gym.core.round_streams.RoundStreams`, the streams the env draws them from), so
:func:`warm_benchmarks` can decode them first, many queries per forward.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

RoundsEnded = Callable[[np.ndarray, np.ndarray, dict[str, Any], dict[str, Any]], None]
"""Called as ``(ended, played, observations, final)`` after each step where rows ended a round: ``ended``, the
rows' indices ``(E,)``; ``played``, the rounds recorded per row so far ``(N,)`` (these included);
``observations`` and ``final``, the step's observation and info entries of the ended rows (``(E, ...)``)."""


@dataclass(frozen=True)
class RowsCheckpoint:
    """Where and how often :func:`play_rows` saves the rows' state, and what the saved state must match.

    The file holds no pickle (:mod:`~tokenized_bandit_gym.evaluation.saved_state`: a NumPy ``.npz`` of the agents
    with their random generators, the regret so far and the rounds played, read with ``allow_pickle=False``),
    written atomically; it is read back only when its ``identity``, seeds, rounds and agent types are this call's,
    so a checkpoint of other settings is ignored (and replaced at the next save), and when this code made it (the
    package version and git commit, :func:`~tokenized_bandit_gym.evaluation.provenance.code_version`, saved with
    it): a checkpoint of other code is not resumed, and one printed line names both versions. A file that is not
    such a checkpoint (a pickle of older code, whatever its name) is never unpickled: one printed line says it is
    ignored. An agent is rebuilt only as the classes of this call's agents; an agent whose state the file cannot
    hold (an SB3 model, say) is not checkpointed (one printed line), and an interrupted group starts again. The
    env's problem and the agents' task are not saved: they are this call's own objects again after a resume (each
    agent must keep them, or what it derives from them, as attributes).

    Attributes:
        path: the checkpoint file (created with its folder; removed by the caller when the runs are saved).
        every: rounds between two saves (>= 1); a save happens at the first step where every row ends a round
            together once that many rounds have passed since the last.
        identity: what the runs are (settings, agent names): JSON-like values compared for equality.
    """

    path: str
    every: int = 25
    identity: Any = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"RowsCheckpoint.path must be a non-empty file path, got {self.path!r}")
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(
                f"RowsCheckpoint.every (rounds between saves) must be a positive integer, got {self.every!r}"
            )


def _checkpoint_header(checkpoint: RowsCheckpoint, agents: Sequence[Any], seeds: Sequence[int], rounds: int) -> dict:
    from tokenized_bandit_gym.evaluation import provenance

    return {
        "identity": checkpoint.identity,
        "seeds": [int(seed) for seed in seeds],
        "rounds": rounds,
        "agent_types": [f"{type(agent).__module__}.{type(agent).__qualname__}" for agent in agents],
        "code_version": provenance.code_version(),
    }


def _saved_for_this_call(path: str, expected: dict[str, Any]) -> bool:
    """Whether the saved-state file ``path`` exists and its header is ``expected``, this call's (with ``code_version``).

    No file, or one that is not a saved-state file (a pickle left by older code, whatever its name, is never
    unpickled: one printed line says it is ignored): False. Other settings: False, silently (the file is of other
    runs). The same settings made by other code: False, with one printed line naming both versions
    (:func:`~tokenized_bandit_gym.evaluation.provenance.made_by_this_code`).
    """
    from tokenized_bandit_gym.evaluation import provenance
    from tokenized_bandit_gym.evaluation.saved_state import StateError, as_header, read_header

    if not os.path.exists(path):
        return False
    try:
        saved = read_header(path)
    except StateError as error:
        print(f"ignoring {error} (never unpickled; replaced at the next save)", flush=True)
        return False
    if not isinstance(saved, dict):
        return False
    settings = as_header({key: value for key, value in expected.items() if key != "code_version"})
    if {key: value for key, value in saved.items() if key != "code_version"} != settings:
        return False
    return provenance.made_by_this_code(saved.get("code_version"), path)


def _save_checkpoint(
    checkpoint: RowsCheckpoint,
    header: dict,
    shared: dict[str, Any],
    agents: Sequence[Any],
    regret: np.ndarray,
    played: np.ndarray,
) -> bool:
    """Write the checkpoint; False, with one printed line, when an agent holds state the file cannot hold."""
    from tokenized_bandit_gym.evaluation.saved_state import StateError, write_state

    try:
        write_state(checkpoint.path, header, {"agents": list(agents), "regret": regret, "played": played}, shared)
    except StateError as error:
        print(f"not checkpointing to {checkpoint.path}: {error}; an interrupted group starts again", flush=True)
        return False
    return True


def _load_checkpoint(
    checkpoint: RowsCheckpoint, header: dict, shared: dict[str, Any], agents: Sequence[Any]
) -> dict | None:
    """The saved state when the file exists and matches ``header``, else None (one printed line if unreadable)."""
    from tokenized_bandit_gym.evaluation.saved_state import StateError, classes_of, read_state

    if not _saved_for_this_call(checkpoint.path, header):
        return None
    try:
        return read_state(checkpoint.path, shared, classes_of(*agents))
    except StateError as error:
        print(f"not resuming from {checkpoint.path}: {error}", flush=True)
        return None


def _restore_agents(agents: Sequence[Any], saved: Sequence[Any]) -> None:
    """Put each saved agent's state into the caller's agent object (same type), so the caller's references hold."""
    for agent, state in zip(agents, saved, strict=True):
        vars(agent).clear()
        vars(agent).update(vars(state))


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


def warm_benchmarks(
    env: Any,
    seeds: Sequence[int],
    rounds: int,
    chunk: int,
    progress: bool = True,
    cache_path: str = "",
    identity: Any = None,
) -> None:
    """Decode the oracle-greedy benchmark of every query the runs of ``seeds`` will meet, ``chunk`` queries at once.

    Fixed-length runs do not need it: their benchmarks are decoded in the rounds' own forward, which costs less
    (the module docstring). It serves runs whose rows restart apart, and benchmarks wanted before any round.
    Queries already cached are skipped. ``chunk * k`` candidate rows go through each forward. With
    ``cache_path``, the problem's benchmarks are read from that file first when its ``identity`` is this one
    (the settings that define the problem) and this code wrote it (else one printed line names both versions), and
    written back atomically after each chunk, so a resumed call decodes none of them again. The file holds no
    pickle (:mod:`~tokenized_bandit_gym.evaluation.saved_state`); one that is not such a file is ignored (one line).

    Args:
        env: an LLM env or vector env.
        seeds: the reset seeds of the runs.
        rounds: T.
        chunk: queries decoded together (>= 1).
        progress: show a progress bar.
        cache_path: the benchmarks' file ('' for none).
        identity: JSON-like settings the file must match.

    Raises:
        ValueError: ``chunk`` < 1.
    """
    import torch

    from tokenized_bandit_gym.evaluation import provenance
    from tokenized_bandit_gym.evaluation.progress import ProgressCounter
    from tokenized_bandit_gym.evaluation.saved_state import StateError, read_state, write_state
    from tokenized_bandit_gym.llm.language_model_problem import BenchmarkCache

    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk (queries decoded together) must be a positive integer, got {chunk!r}")
    problem = env.unwrapped.problem
    header = {"identity": identity, "code_version": provenance.code_version()}
    if cache_path and _saved_for_this_call(cache_path, header):
        try:
            saved = read_state(cache_path)
            problem.keep_benchmarks(BenchmarkCache(saved["greedy"], saved["beam"]))
        except (StateError, TypeError, KeyError, AttributeError, ValueError) as error:
            print(f"not reusing the benchmarks of {cache_path}: {error}", flush=True)
    queries = [query for query in queries_of_runs(env, seeds, rounds) if not problem.has_oracle_greedy(query)]
    bar = ProgressCounter(len(queries), "oracle greedy, every query ahead", "benchmark", enabled=progress, leave=False)
    for start in range(0, len(queries), chunk):
        part = queries[start : start + chunk]
        problem.oracle_greedy(torch.tensor(part, device=problem.device))
        if cache_path:
            cached = problem.cached_benchmarks()
            write_state(cache_path, header, {"greedy": cached.greedy, "beam": cached.beam})
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
    checkpoint: RowsCheckpoint | None = None,
    out: np.ndarray | None = None,
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
        checkpoint: save the rows' state as it says, and resume from its file when that matches this call
            (the agents passed here then take the saved agents' state).
        out: a float64 ``(N, T)`` array to hold the per-round regret as it is played (a resumed call's earlier
            rounds are in it from the start), e.g. for a progress record; a new array by default.

    Returns:
        The per-round regret of each row, ``(N, T)`` (``out`` when given).

    Raises:
        ValueError: ``agents`` and ``seeds`` do not have one entry per row, ``rounds`` < 1, or ``out`` has
            another shape or dtype.
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
    if out is not None and (out.shape != (num_rows, rounds) or out.dtype != np.float64):
        raise ValueError(f"out must be a float64 array of shape {(num_rows, rounds)}, got {out.dtype} {out.shape}")
    task = vector_task(env, rounds)
    for agent, seed in zip(agents, seeds, strict=True):
        agent.reset(task, seed)
    rows = IndependentAgents(lambda: agents[0])
    rows.agents = list(agents)  # row i's own agent, reset above with its own seed
    regret = np.zeros((num_rows, rounds)) if out is None else out  # (N, T)
    regret[:] = 0.0
    played = np.zeros(num_rows, dtype=np.int64)  # (N,) rounds recorded per row
    shared = {"task": task, "problem": task.problem}
    header = _checkpoint_header(checkpoint, agents, seeds, rounds) if checkpoint is not None else {}
    saved = _load_checkpoint(checkpoint, header, shared, agents) if checkpoint is not None else None
    observations, infos = env.reset(seed=list(seeds))
    if saved is not None:
        _restore_agents(agents, saved["agents"])
        regret[:] = saved["regret"]
        played[:] = saved["played"]
        every_row = {"reset_mask": np.ones(num_rows, dtype=bool)}
        for _ in range(int(played.min())):  # the streams of round 1..t; each restart draws the next round
            observations, infos = env.reset(options=every_row)
    last_save = int(played.min())
    needs_action = np.ones(num_rows, dtype=bool)
    bar = ProgressCounter(num_rows * rounds, label, "round", enabled=progress, leave=False)
    bar.update(int(played.sum()))
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
        reached = int(played.min())
        if checkpoint is not None and ended.size == num_rows and reached - last_save >= checkpoint.every:
            if not _save_checkpoint(checkpoint, header, shared, agents, regret, played):
                checkpoint = None
            last_save = reached
    bar.close()
    return regret
