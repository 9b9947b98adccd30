"""Run leaderboard runs in this process and in local worker processes beside it.

By default (no worker count given) the first run is played in this process and timed; worker
processes are started for the rest only when the work left, at the measured cost per round, is
larger than what starting them costs (a spawned worker spends about :data:`WORKER_START_SECONDS`
importing torch and the package before its first run). So a small sweep, or one on a busy machine,
never runs slower than with one worker.

With ``w`` workers, this process is one of them: it keeps playing runs (in a thread, its imports and
loaded models already paid for) while ``w - 1`` spawned processes play the others, so two workers
on two cores pay the start-up once, not twice. Runs are handed out one at a time as a worker frees
up, from a :class:`~tokenized_bandit_gym.evaluation.execute_run.RunSource` (so a run claimed from a
shared store is claimed only when a worker can start it).

Workers are spawned (``multiprocessing`` "spawn" context, safe with torch and on every OS) and
run :func:`~tokenized_bandit_gym.evaluation.execute_run.execute_run`; results come back to the
parent, which stores each as soon as it finishes. Workers ignore SIGINT and SIGTERM: on Ctrl-C or
``kill`` the parent sets a shared stop event, each worker (and the parent's own playing thread)
abandons its run at the end of the current round, the pool shuts down cleanly, and what finished
is kept; a rerun resumes. If the parent is killed (``kill -9``), a watchdog thread in each worker
notices within half a second and exits. Every run is played under the same thread settings (see
:mod:`~tokenized_bandit_gym.evaluation.execute_run`), in a worker or in this process alike.
"""

from __future__ import annotations

import os
import queue as queue_module
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from multiprocessing import get_context
from typing import Any

from tokenized_bandit_gym.evaluation.execute_run import (
    ProgressCallback,
    RunSource,
    as_run_source,
    execute_run,
    thread_environment,
)
from tokenized_bandit_gym.evaluation.run_failure import RunFailure
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec
from tokenized_bandit_gym.registration import AgentRegistrations, agent_registrations, restore_agent_registrations

_worker_queue: Any = None
_worker_stop: Any = None
# How often the parent looks for a free run while every remaining one is held by another process.
_POLL_SECONDS = 0.25
# A spawned worker's cost before its first run: the interpreter, torch and the package imported
# again (2.3 s measured on a loaded 2-core machine; rounded up, since a busy machine makes it longer).
WORKER_START_SECONDS = 3.0


def available_cores() -> int:
    """CPU cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def idle_cores() -> int:
    """Cores free for workers now: the available cores less the 1-minute load of the others, at least 1.

    The load average counts this process too (it is playing a run when this is asked), so one core
    of the load is its own.
    """
    cores = available_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system: trust the core count
        return cores
    return max(1, min(cores, round(cores - max(0.0, load - 1.0))))


def workers_worth_starting(rounds_left: Sequence[int] | None, seconds_per_round: float, cores: int) -> int:
    """How many workers to use for the runs left, 1 meaning none started (keep playing in this process).

    This process keeps playing while ``w - 1`` spawned workers start, so with ``w`` workers the rest
    takes about ``(work + (w - 1) * WORKER_START_SECONDS) / w`` instead of ``work`` (``work`` = the
    rounds left times ``seconds_per_round``, measured on the runs played here): workers pay off
    once the work left exceeds one start-up, and then every idle core is used.

    Args:
        rounds_left: the rounds of each run not handed out yet, or None when the source cannot
            say (then the idle cores are used).
        seconds_per_round: the measured cost of a round in this process.
        cores: the idle cores.
    """
    if rounds_left is None:
        return cores
    workers = min(cores, len(rounds_left))
    if workers < 2:
        return 1
    work = sum(rounds_left) * seconds_per_round
    return workers if (work + (workers - 1) * WORKER_START_SECONDS) / workers < work else 1


def _exit_when_orphaned(parent: int) -> None:
    """Watchdog thread of a worker: exit as soon as the parent is gone (``kill -9`` of ``tbg run``)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _init_worker(progress_queue: Any, stop_event: Any, parent: int, registrations: AgentRegistrations) -> None:
    """Pool initializer: ignore Ctrl-C and SIGTERM (the parent handles them), keep the queue and the stop event.

    It also repeats the parent's agent registrations (``tbg run --import`` modules, ``register_agent``
    names), so a user's agent is made here as in the parent.
    """
    global _worker_queue, _worker_stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    restore_agent_registrations(registrations)
    _worker_queue = progress_queue
    _worker_stop = stop_event
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _report_progress(key: str, rounds: int) -> None:
    _worker_queue.put((key, rounds))


def _should_stop() -> bool:
    return bool(_worker_stop.is_set())


def _run_in_worker(run: RunSpec) -> RunRecord | RunFailure:
    """Worker entry point: the record, or the failure (so the pool keeps going)."""
    return _play(run, _report_progress if _worker_queue is not None else None, _should_stop)


def _play(
    run: RunSpec, progress: ProgressCallback | None, stop: Callable[[], bool] | None = None
) -> RunRecord | RunFailure:
    """One run: its record, or its failure (so the sweep keeps going); a run asked to stop before it starts fails."""
    if stop is not None and stop():
        return RunFailure(spec=run, error="RunInterrupted: stopped before it started")
    try:
        return execute_run(run, progress=progress, stop=stop)
    except Exception as error:  # noqa: BLE001  (any agent or env error fails this run only)
        return RunFailure(spec=run, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())


def run_local(
    runs: Sequence[RunSpec] | RunSource,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
) -> Iterator[RunRecord | RunFailure]:
    """Yield each run's record (or failure) as soon as it finishes.

    Args:
        runs: the runs to play, or a source handing them out (claims on a shared store).
        workers: parallel worker processes. None (the default) plays in this process and starts
            workers on the idle cores once the measured work left outweighs their start-up (see
            :func:`workers_worth_starting`). With one worker, or one run, everything runs in this
            process.
        progress: called in this process with ``(run key, rounds)`` as rounds finish.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if workers is not None and not hasattr(runs, "next_run"):
        workers = min(workers, max(1, len(runs)))
    source = as_run_source(runs)
    with thread_environment():
        if workers is None:
            yield from _run_here_then_in_pool_if_worth_it(source, progress)
        elif workers == 1:
            yield from _run_in_this_process(source, progress)
        else:
            yield from _run_in_pool(source, workers, progress)


def _run_in_this_process(
    source: RunSource, progress: ProgressCallback | None, pool_workers: Callable[[float], int] | None = None
) -> Iterator[RunRecord | RunFailure]:
    """Play the source's runs here; after each, hand the rest to a pool if ``pool_workers(seconds a round)`` > 1."""
    played_rounds, played_seconds = 0, 0.0
    while True:
        run = source.next_run()
        if run is None:
            if source.exhausted():
                return
            time.sleep(_POLL_SECONDS)
            continue
        start = time.perf_counter()
        outcome = _play(run, progress)
        # the rounds' own time (a worker pays the imports and the env's construction in its start-up)
        played_seconds += (
            float(outcome.arrays["wall_time"].sum()) if isinstance(outcome, RunRecord) else time.perf_counter() - start
        )
        played_rounds += run.rounds
        yield outcome
        if pool_workers is not None and (workers := pool_workers(played_seconds / max(1, played_rounds))) > 1:
            yield from _run_in_pool(source, workers, progress)
            return


def _run_here_then_in_pool_if_worth_it(
    source: RunSource, progress: ProgressCallback | None
) -> Iterator[RunRecord | RunFailure]:
    """The default: runs here, timed, until starting workers on the idle cores pays off for the rest."""
    rounds_left = getattr(source, "rounds_left", None)

    def pool_workers(seconds_per_round: float) -> int:
        return workers_worth_starting(rounds_left() if rounds_left else None, seconds_per_round, idle_cores())

    yield from _run_in_this_process(source, progress, pool_workers)


def _run_in_pool(
    source: RunSource, workers: int, progress: ProgressCallback | None
) -> Iterator[RunRecord | RunFailure]:
    """Play the source's runs on ``workers`` workers: this process (a thread) and ``workers - 1`` spawned ones."""
    context = get_context("spawn")
    progress_queue = context.Queue() if progress is not None else None
    stop_event = context.Event()
    local_progress: queue_module.SimpleQueue[tuple[str, int]] = queue_module.SimpleQueue()
    here = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tbg-run-here")
    spawned = ProcessPoolExecutor(
        max_workers=workers - 1,
        mp_context=context,
        initializer=_init_worker,
        initargs=(progress_queue, stop_event, os.getpid(), agent_registrations()),
    )

    def report_here(key: str, rounds: int) -> None:
        local_progress.put((key, rounds))

    try:
        here_busy: Future[RunRecord | RunFailure] | None = None
        pending: set[Future[RunRecord | RunFailure]] = set()
        while True:
            while len(pending) < workers and (run := source.next_run()) is not None:
                if here_busy is None:  # this process takes a run first: it starts at once
                    here_busy = here.submit(_play, run, report_here if progress else None, stop_event.is_set)
                    pending.add(here_busy)
                else:
                    pending.add(spawned.submit(_run_in_worker, run))
            if not pending:
                if source.exhausted():
                    return
                time.sleep(_POLL_SECONDS)
                continue
            done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
            _drain(progress_queue, progress)
            _drain(local_progress, progress)
            for future in done:
                if future is here_busy:
                    here_busy = None
                yield future.result()
    finally:
        # Normal end: nothing is left. Interrupted (Ctrl-C, or the caller closed us): running runs
        # stop at the end of their round and are discarded, queued ones are cancelled.
        stop_event.set()
        here.shutdown(wait=True, cancel_futures=True)
        spawned.shutdown(wait=True, cancel_futures=True)
        if progress_queue is not None:
            progress_queue.close()


def _drain(progress_queue: Any, progress: ProgressCallback | None) -> None:
    if progress_queue is None or progress is None:
        return
    while True:
        try:
            key, rounds = progress_queue.get_nowait()
        except (queue_module.Empty, OSError, ValueError):
            return
        progress(key, rounds)
