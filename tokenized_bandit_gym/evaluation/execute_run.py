"""Play one leaderboard run in the current process (the worker function of every backend).

Top-level functions only, so process pools (spawn) and Ray can pickle them by reference.

Thread settings: every backend plays every run under the same settings, so the same run gives
the same bits whichever backend and how many workers play it (a float sum split over 2 threads
is not the sum over 1). Each run uses :data:`RUN_TORCH_THREADS` torch threads and BLAS/OpenMP
pools limited to :data:`RUN_TORCH_THREADS` threads (``threadpoolctl``, so it holds in a process
whose NumPy loaded its BLAS earlier); worker processes also start with
:data:`THREAD_ENVIRONMENT` (what Ray gives its workers anyway). Parallelism comes from running
runs side by side. The settings observed inside the run are stored with it
(``metadata["thread_settings"]``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from typing import Any, Protocol, cast

from tokenized_bandit_gym.evaluation.provenance import code_version
from tokenized_bandit_gym.evaluation.run_record import ARRAY_NAMES, RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec
from tokenized_bandit_gym.threads import THREAD_ENVIRONMENT

# Progress callbacks receive (run key, rounds finished since the last call).
ProgressCallback = Callable[[str, int], None]

# Torch intra-op threads of every run, on every backend.
RUN_TORCH_THREADS = 1


@contextlib.contextmanager
def thread_environment() -> Iterator[dict[str, str]]:
    """Set :data:`THREAD_ENVIRONMENT` in ``os.environ`` (worker processes started inside inherit it); restore it."""
    previous = {name: os.environ.get(name) for name in THREAD_ENVIRONMENT}
    os.environ.update(THREAD_ENVIRONMENT)
    try:
        yield dict(THREAD_ENVIRONMENT)
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def thread_settings() -> dict[str, Any]:
    """The thread settings this process runs under now (stored with each run).

    Returns:
        ``torch_threads``, the :data:`THREAD_ENVIRONMENT` variables, and ``thread_pools``: the
        threads of each BLAS/OpenMP library loaded (``"openblas": 1``...).
    """
    import torch
    from threadpoolctl import threadpool_info

    settings: dict[str, Any] = {"torch_threads": torch.get_num_threads()}
    settings.update({name: os.environ.get(name) for name in THREAD_ENVIRONMENT})
    pools: dict[str, int] = {}
    for pool in threadpool_info():
        pools[pool["internal_api"]] = max(pools.get(pool["internal_api"], 0), int(pool["num_threads"]))
    settings["thread_pools"] = dict(sorted(pools.items()))
    return settings


class RunSource(Protocol):
    """Where a backend takes runs from, one at a time, as its workers free up.

    A source may also have ``rounds_left() -> list[int]``, the rounds of each run not handed out
    yet, which the local backend weighs against its workers' start-up.
    """

    def next_run(self) -> RunSpec | None:
        """A run to play now, or None when none is free now (another process may still hold some)."""

    def exhausted(self) -> bool:
        """True once no run will come any more (checked after :meth:`next_run` returned None)."""


class QueuedRuns:
    """A :class:`RunSource` over a fixed list of runs (each handed out once)."""

    def __init__(self, runs: Sequence[RunSpec]) -> None:
        self._runs = list(runs)
        self._next = 0

    def next_run(self) -> RunSpec | None:
        """The next run of the list, or None at its end."""
        if self._next >= len(self._runs):
            return None
        self._next += 1
        return self._runs[self._next - 1]

    def exhausted(self) -> bool:
        """True once every run was handed out."""
        return self._next >= len(self._runs)

    def rounds_left(self) -> list[int]:
        """The rounds of each run not handed out yet (what the local backend weighs against starting workers)."""
        return [run.rounds for run in self._runs[self._next :]]


def as_run_source(runs: Sequence[RunSpec] | RunSource) -> RunSource:
    """``runs`` itself if it is a :class:`RunSource`, else a :class:`QueuedRuns` over it."""
    if hasattr(runs, "next_run"):
        return cast(RunSource, runs)
    return QueuedRuns(runs)


class RunInterrupted(Exception):
    """Raised inside a run when the backend asks it to stop (the run is discarded)."""


class _ProgressAgent:
    """Forwards to an agent or a BatchedAgent; after each round ended, reports progress and checks for a stop.

    It has the methods of both protocols; the env decides which are called (a single env: ``act``
    and ``update``; a vector env: ``act_batch`` and ``update_batch``).
    """

    def __init__(
        self,
        agent: Any,
        key: str,
        callback: ProgressCallback | None,
        every: int,
        stop: Callable[[], bool] | None,
    ) -> None:
        self._agent = agent
        self._key = key
        self._callback = callback
        self._every = every
        self._stop = stop
        self._since = 0
        self.name = getattr(agent, "name", type(agent).__name__)
        if hasattr(agent, "feedback_channels"):  # what the agent learns from, checked against the env's feedback
            self.feedback_channels = agent.feedback_channels

    def reset(self, task: Any, *arguments: Any) -> None:
        self._agent.reset(task, *arguments)  # (seed) for an Agent, (num_envs, seed) for a BatchedAgent

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        return self._agent.act(observation, info)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        self._agent.update(observation, reward, info)
        self._ended(1)

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> Any:
        return self._agent.act_batch(observations, infos, needs_action)

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        self._agent.update_batch(rows, observations, rewards, infos)
        self._ended(len(rows))

    def _ended(self, rounds: int) -> None:
        if self._stop is not None and self._stop():
            raise RunInterrupted(f"run {self._key} was asked to stop")
        self._since += rounds
        if self._since >= self._every:
            self.flush()

    def flush(self) -> None:
        if self._since and self._callback is not None:
            self._callback(self._key, self._since)
        self._since = 0


def _version(distribution: str) -> str | None:
    try:
        return importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def environment_metadata() -> dict[str, Any]:
    """Versions and code revision of this process (cached: computed once per process)."""
    return {
        **code_version(),
        "torch_version": _version("torch"),
        "transformers_version": _version("transformers"),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def execute_run(
    run: RunSpec,
    threads: int | None = RUN_TORCH_THREADS,
    progress: ProgressCallback | None = None,
    stop: Callable[[], bool] | None = None,
) -> RunRecord:
    """Make the env and the agent, play ``run.rounds`` rounds online, return the record.

    A :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent` (e.g. ``batched_greedy_etc``) plays
    the env's native vector env with ``batch_size`` sub-envs (``gym.make_vec``), the T rounds
    counted over all of them; any other agent plays the single env.

    Args:
        run: what to run.
        threads: torch intra-op threads and BLAS/OpenMP pool threads for this run (restored
            afterwards); None keeps the current settings. Every backend uses the default,
            :data:`RUN_TORCH_THREADS`.
        progress: called with ``(run.key, rounds)`` about 50 times per run.
        stop: checked after every round; when it returns True the run raises
            :class:`RunInterrupted` (backends use it to stop workers cleanly on Ctrl-C).

    Returns:
        The per-round arrays and the metadata of the run (versions, device, wall time).
    """
    import gymnasium as gym
    import torch
    from threadpoolctl import threadpool_limits

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.evaluation.alignment_regime import regime_summary
    from tokenized_bandit_gym.evaluation.run_online import run_online
    from tokenized_bandit_gym.registration import make_agent

    previous_threads = torch.get_num_threads()
    with contextlib.ExitStack() as limits:
        if threads is not None:
            limits.enter_context(threadpool_limits(limits=threads))  # BLAS and OpenMP pools, restored on exit
            torch.set_num_threads(threads)
            limits.callback(torch.set_num_threads, previous_threads)
        settings = thread_settings()
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        start = time.perf_counter()
        env: gym.Env[Any, Any] | gym.vector.VectorEnv = gym.make(run.env_id, **run.env_kwargs)
        agent: Any = make_agent(run.agent, **run.agent_kwargs)
        if callable(getattr(agent, "act_batch", None)):  # a BatchedAgent: batch_size rounds at once, vector env
            env.close()
            env = gym.make_vec(run.env_id, num_envs=getattr(agent, "batch_size", 1), **run.env_kwargs)
        if progress is not None or stop is not None:
            agent = _ProgressAgent(agent, run.key, progress, every=max(1, run.rounds // 50), stop=stop)
        result = run_online(env, agent, rounds=run.rounds, seed=run.seed)
        if isinstance(agent, _ProgressAgent):
            agent.flush()
        problem = getattr(env.unwrapped, "problem", None)
        device = str(problem and problem.device)
        benchmark = str(getattr(env.unwrapped, "optimal_kind", "exact"))  # what regret is measured against
        theta_source = getattr(problem, "theta_source", None)  # LLM alignment
        wall_time = time.perf_counter() - start
        regime = regime_summary(env)  # after the run's time: a few noise-free decodes, not part of the run
        env.close()
    metadata = dict(environment_metadata())
    metadata.update(
        {
            "device": device,
            "benchmark": benchmark,
            **({"theta_source": str(theta_source)} if theta_source is not None else {}),
            **({"regime": regime} if regime is not None else {}),
            "wall_time": wall_time,
            "started_at": started_at,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "torch_threads": settings["torch_threads"],
            "thread_settings": settings,
        }
    )
    arrays = {name: getattr(result, name) for name in ARRAY_NAMES}
    return RunRecord(spec=run, arrays=arrays, metadata=metadata)
