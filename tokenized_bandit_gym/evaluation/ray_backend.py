"""Run leaderboard runs as Ray tasks, on an existing cluster or a local Ray.

Ray is an optional dependency (``pip install "tokenized-bandit-gym[distributed]"``). Each run is
one task (``num_cpus=1``) calling the same worker function as the local backend under the same
thread settings (the tasks' runtime environment sets
:data:`~tokenized_bandit_gym.threads.THREAD_ENVIRONMENT`), so a run gives the same
bits on Ray as locally; the driver stores each result as soon as it finishes. Each task first repeats
the driver's agent registrations (:func:`~tokenized_bandit_gym.registration.restore_agent_registrations`),
so a user's agent plays on Ray too. Workers on other machines need the package (and its version), and
the modules of any user agent, installed. A task whose node dies is retried on
another node (Ray's ``max_retries``); a run that still cannot finish is reported as failed.

A local Ray started here is shut down at the end, and also when this process is killed
(``kill -9``): a small reaper process waits for this process to die, then kills the Ray processes
it started (GCS, raylet, dashboard and runtime-env agents, workers), which Ray itself would leave
running, reparented to PID 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from tokenized_bandit_gym.evaluation.execute_run import (
    ProgressCallback,
    RunSource,
    as_run_source,
    execute_run,
)
from tokenized_bandit_gym.evaluation.results_store import process_alive
from tokenized_bandit_gym.evaluation.run_failure import RunFailure
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec
from tokenized_bandit_gym.registration import AgentRegistrations, agent_registrations, restore_agent_registrations
from tokenized_bandit_gym.threads import THREAD_ENVIRONMENT


class RayUnavailableError(RuntimeError):
    """Ray is not installed (it is the optional ``distributed`` extra)."""


def import_ray() -> Any:
    """Import Ray or raise :class:`RayUnavailableError` naming the extra that installs it."""
    try:
        import ray
    except ImportError as error:
        raise RayUnavailableError(
            "the ray backend needs Ray, which is not installed: "
            'pip install "tokenized-bandit-gym[distributed]" (or pip install "ray[default]")'
        ) from error
    return ray


def _ray_task(run: RunSpec, registrations: AgentRegistrations) -> RunRecord | RunFailure:
    try:
        restore_agent_registrations(registrations)  # the driver's user agents (``tbg run --import``, register_agent)
        return execute_run(run)
    except Exception as error:  # noqa: BLE001  (any agent or env error fails this run only)
        return RunFailure(spec=run, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())


def _descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``)."""
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children", encoding="ascii") as handle:
                    children = [int(child) for child in handle.read().split()]
            except OSError:
                continue
            for child in children:
                if child not in found:
                    found.add(child)
                    frontier.append(child)
    return found


def reap_when_parent_dies(parent: int, interval: float = 0.5) -> None:
    """Reaper loop: track ``parent``'s new descendants; once ``parent`` is gone, SIGKILL the ones still alive.

    Run in its own process (``python -m tokenized_bandit_gym.evaluation.ray_backend PID``) started by
    the driver before ``ray.init``; it excludes itself.
    """
    me = os.getpid()
    before = _descendants(parent)  # the parent's other children are not Ray's: leave them be
    print("ready", flush=True)  # the parent starts Ray only now
    tracked: set[int] = set()
    while True:
        if not process_alive(parent):
            break
        tracked |= _descendants(parent) - before - {me}
        time.sleep(interval)
    # Kill what was tracked and anything those processes started meanwhile, parents first so
    # that raylet does not restart its agents.
    for _ in range(3):
        alive = {pid for pid in tracked if os.path.exists(f"/proc/{pid}")}
        for pid in list(alive):
            alive |= _descendants(pid) - {me}
        if not alive:
            return
        for pid in sorted(alive):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        tracked = alive
        time.sleep(interval)


def _start_reaper() -> subprocess.Popen[bytes] | None:
    """Start the reaper of the local Ray about to be started here (Linux only; None elsewhere)."""
    if not os.path.isdir(f"/proc/{os.getpid()}/task"):
        return None
    reaper = subprocess.Popen(
        [sys.executable, "-m", "tokenized_bandit_gym.evaluation.ray_backend", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or SIGTERM to the terminal's process group leaves it be
    )
    if reaper.stdout is not None:  # stdout=PIPE: always
        reaper.stdout.readline()  # it has taken its snapshot: Ray may start
    return reaper


def run_ray(
    runs: Sequence[RunSpec] | RunSource,
    address: str | None = None,
    progress: ProgressCallback | None = None,
) -> Iterator[RunRecord | RunFailure]:
    """Yield each run's record (or failure) as soon as its Ray task finishes.

    At most as many tasks are in flight as the cluster has CPUs, so runs claimed from a shared
    store are claimed only when they can start.

    Args:
        runs: the runs to play, or a source handing them out (claims on a shared store).
        address: a Ray cluster address (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``); None
            connects to ``RAY_ADDRESS`` if set, else starts a local Ray that is shut down at the end.
        progress: called with ``(run key, rounds)`` when a run finishes (whole runs only).
    """
    ray = import_ray()
    source = as_run_source(runs)
    started_here = not ray.is_initialized()
    reaper = None
    if started_here:
        local = address is None and not os.environ.get("RAY_ADDRESS")
        reaper = _start_reaper() if local else None
        # ray.init installs its own SIGTERM handler (exit 1 and a C++ stack dump); `tbg run`'s handler,
        # which stops the runs in progress and says that finished runs are saved, is put back.
        main_thread = threading.current_thread() is threading.main_thread()
        sigterm_handler = signal.getsignal(signal.SIGTERM) if main_thread else None
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": dict(THREAD_ENVIRONMENT)},
        )
        if main_thread and sigterm_handler is not None:
            signal.signal(signal.SIGTERM, sigterm_handler)
    remote = ray.remote(num_cpus=1, max_retries=3)(_ray_task)
    capacity = max(1, int(ray.cluster_resources().get("CPU", 1)))
    registrations = agent_registrations()
    references: dict[Any, RunSpec] = {}
    try:
        while True:
            while len(references) < capacity and (run := source.next_run()) is not None:
                references[remote.remote(run, registrations)] = run
            if not references:
                if source.exhausted():
                    return
                time.sleep(0.25)
                continue
            done, _ = ray.wait(list(references), num_returns=1, timeout=0.25)
            for reference in done:
                run = references.pop(reference)
                try:
                    outcome = ray.get(reference)
                except ray.exceptions.RayError as error:
                    outcome = RunFailure(spec=run, error=f"{type(error).__name__}: {error}")
                if progress is not None:
                    progress(run.key, run.rounds)
                yield outcome
    finally:
        for reference in references:
            ray.cancel(reference, force=True)
        if started_here:
            ray.shutdown()
        if reaper is not None:
            reaper.kill()
            reaper.communicate()  # reaps it and closes its pipe


if __name__ == "__main__":
    reap_when_parent_dies(int(sys.argv[1]))
