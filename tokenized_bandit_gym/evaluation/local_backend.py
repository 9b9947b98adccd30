"""Run leaderboard runs in local worker processes (all cores by default).

Workers are spawned (``multiprocessing`` "spawn" context, safe with torch and on every OS) and
run :func:`~tokenized_bandit_gym.evaluation.execute_run.execute_run`; results come back to the
parent, which stores each as soon as it finishes. Workers ignore SIGINT: on Ctrl-C the parent
sets a shared stop event, each worker abandons its run at the end of the current round, the pool
shuts down cleanly, and what finished is kept; a rerun resumes. If the parent is killed
(``kill -9``), a watchdog thread in each worker notices within half a second and exits.
"""

from __future__ import annotations

import os
import queue as queue_module
import signal
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any

from tokenized_bandit_gym.evaluation.execute_run import ProgressCallback, execute_run
from tokenized_bandit_gym.evaluation.run_failure import RunFailure
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec

_worker_queue: Any = None
_worker_stop: Any = None
_worker_threads: int | None = None


def available_cores() -> int:
    """CPU cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def threads_per_worker(workers: int) -> int:
    """Torch threads per worker so that ``workers`` workers share the cores."""
    return max(1, available_cores() // max(1, workers))


def _exit_when_orphaned(parent: int) -> None:
    """Watchdog thread of a worker: exit as soon as the parent is gone (``kill -9`` of ``tbg run``)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _init_worker(progress_queue: Any, stop_event: Any, threads: int, parent: int) -> None:
    """Pool initializer: ignore Ctrl-C (the parent handles it), keep the queue and the stop event."""
    global _worker_queue, _worker_stop, _worker_threads
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_queue = progress_queue
    _worker_stop = stop_event
    _worker_threads = threads
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _report_progress(key: str, rounds: int) -> None:
    _worker_queue.put((key, rounds))


def _should_stop() -> bool:
    return bool(_worker_stop.is_set())


def _run_in_worker(run: RunSpec) -> RunRecord | RunFailure:
    """Worker entry point: the record, or the failure (so the pool keeps going)."""
    if _worker_stop.is_set():
        return RunFailure(spec=run, error="RunInterrupted: stopped before it started")
    try:
        return execute_run(
            run,
            threads=_worker_threads,
            progress=_report_progress if _worker_queue is not None else None,
            stop=_should_stop,
        )
    except Exception as error:  # noqa: BLE001  (any agent or env error fails this run only)
        return RunFailure(spec=run, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())


def run_local(
    runs: Sequence[RunSpec],
    workers: int | None = None,
    progress: ProgressCallback | None = None,
) -> Iterator[RunRecord | RunFailure]:
    """Yield each run's record (or failure) as soon as it finishes.

    Args:
        runs: the runs to play.
        workers: parallel worker processes (default: every available core). With one worker,
            or one run, everything runs in this process.
        progress: called in this process with ``(run key, rounds)`` as rounds finish.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    workers = min(workers or available_cores(), max(1, len(runs)))
    threads = threads_per_worker(workers)
    if workers == 1:
        for run in runs:
            try:
                yield execute_run(run, threads=threads, progress=progress)
            except Exception as error:  # noqa: BLE001  (any agent or env error fails this run only)
                yield RunFailure(spec=run, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())
        return
    context = get_context("spawn")
    progress_queue = context.Queue() if progress is not None else None
    stop_event = context.Event()
    executor = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(progress_queue, stop_event, threads, os.getpid()),
    )
    try:
        pending: set[Future[RunRecord | RunFailure]] = {executor.submit(_run_in_worker, run) for run in runs}
        while pending:
            done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            _drain(progress_queue, progress)
            for future in done:
                yield future.result()
    finally:
        # Normal end: nothing is left. Interrupted (Ctrl-C, or the caller closed us): running runs
        # stop at the end of their round and are discarded, queued ones are cancelled.
        stop_event.set()
        executor.shutdown(wait=True, cancel_futures=True)
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
