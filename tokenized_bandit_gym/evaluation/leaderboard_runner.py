"""Run every task x agent x seed of a spec that the store does not hold yet, storing each as it ends.

Runs are claimed from the store before they are played (a lease row with a heartbeat, see
:mod:`~tokenized_bandit_gym.evaluation.results_store`), so N ``tbg run`` processes on one store split
the sweep: none plays a run another holds, and the runs of a process that dies are claimed again.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from tokenized_bandit_gym.evaluation.leaderboard_spec import LeaderboardSpec, as_runs
from tokenized_bandit_gym.evaluation.progress import ProgressCounter
from tokenized_bandit_gym.evaluation.results_store import LeaseHolder, ResultsStore, StoreError
from tokenized_bandit_gym.evaluation.run_failure import RunFailure
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec

BACKENDS = ("local", "ray")
# A lease not renewed for this long is claimed again (its holder is presumed dead or cut off).
LEASE_SECONDS = 60.0
# A round of an LLM-backed id costs this many rounds of a synthetic id, for the claim order only (the
# default spec, one thread: about 50 ms a round on stories260K against about 1 ms on the synthetic ids).
LLM_ROUND_WEIGHT = 50


@dataclass
class RunSummary:
    """What one ``tbg run`` did.

    Attributes:
        total: runs in the spec.
        skipped: runs already in the store (not rerun).
        stored: runs played and stored now.
        failures: runs that raised (not stored; a rerun tries them again).
        stored_elsewhere: runs stored meanwhile by other processes sharing the store.
        discarded: runs played here but already stored when they finished (0 unless a lease
            expired while its holder still worked).
    """

    total: int
    skipped: int
    stored: int = 0
    failures: list[RunFailure] = field(default_factory=list)
    stored_elsewhere: int = 0
    discarded: int = 0


class ClaimedRuns:
    """The runs of a sweep, handed out to a backend one claim at a time (a ``RunSource``).

    Each :meth:`next_run` claims the first run neither stored nor leased by a live holder; while
    every remaining run is held elsewhere it returns None, and :meth:`exhausted` stays False until
    they are stored or their holders die. Each run is tried at most once by this process.

    Args:
        runs: the sweep's runs, without duplicates.
        store: the shared store.
        holder: this process.
        lease_seconds: a lease older than this (no heartbeat) is claimed again.
    """

    def __init__(self, runs: Sequence[RunSpec], store: ResultsStore, holder: LeaseHolder, lease_seconds: float):
        self._runs = {run.key: run for run in runs}
        self._store = store
        self._holder = holder
        self._lease_seconds = lease_seconds
        self._tried: set[str] = set()
        self._held_elsewhere = 0

    def next_run(self) -> RunSpec | None:
        """Claim and return the next free run, or None while none is free."""
        untried = [key for key in self._runs if key not in self._tried]
        if not untried:
            self._held_elsewhere = 0
            return None
        key, self._held_elsewhere = self._store.claim(untried, self._holder, self._lease_seconds)
        if key is None:  # the runs others stored meanwhile are never offered again: later polls skip them
            self._tried |= self._store.keys() & self._runs.keys()
            return None
        self._tried.add(key)
        return self._runs[key]

    def exhausted(self) -> bool:
        """True when the last claim found no run held by another live process."""
        return self._held_elsewhere == 0

    def rounds_left(self) -> list[int]:
        """The rounds of each run this process has not tried (others may take some of them)."""
        return [run.rounds for key, run in self._runs.items() if key not in self._tried]


@contextlib.contextmanager
def _heartbeat(store: ResultsStore, holder: LeaseHolder, lease_seconds: float) -> Iterator[None]:
    """Renew ``holder``'s leases every ``lease_seconds / 6`` from a thread (own connection); drop them at the end."""
    stop = threading.Event()

    def beat() -> None:
        with ResultsStore(store.path) as connection:
            while not stop.wait(lease_seconds / 6):
                connection.renew_leases(holder)

    thread = threading.Thread(target=beat, name="tbg-lease-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        store.release(holder)


def estimated_cost(run: RunSpec) -> int:
    """A run's expected cost in synthetic rounds: its rounds, weighted by :data:`LLM_ROUND_WEIGHT` on LLM ids."""
    from tokenized_bandit_gym.registration import LLM_ENVS

    return run.rounds * (LLM_ROUND_WEIGHT if run.env_id in LLM_ENVS else 1)


def pending_runs(runs: Sequence[RunSpec], store: ResultsStore) -> list[RunSpec]:
    """The runs whose key is not in the store, without duplicates, most expensive first.

    Claiming the longest runs first (the longest-processing-time rule) keeps the workers busy until
    the end instead of leaving one long run to finish alone; among runs of equal cost the spec's
    order is kept.
    """
    stored = store.keys()
    seen: set[str] = set()
    pending = []
    for run in runs:
        if run.key not in stored and run.key not in seen:
            seen.add(run.key)
            pending.append(run)
    return sorted(pending, key=estimated_cost, reverse=True)


def run_leaderboard(
    runs: Sequence[RunSpec] | LeaderboardSpec,
    store: ResultsStore,
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    log: TextIO | None = None,
    lease_seconds: float = LEASE_SECONDS,
) -> RunSummary:
    """Play the runs not yet in ``store`` and store each one as soon as it finishes.

    Interrupting (Ctrl-C, ``kill``) loses only the runs in progress: every finished run is
    committed in its own transaction, and calling this again with the same runs resumes. Other
    processes may run the same sweep on the same store at once: each run is claimed before it is
    played, so they split the work. Stored runs take the labels of ``runs``.

    Args:
        runs: typically ``spec.runs()``, or the
            :class:`~tokenized_bandit_gym.evaluation.leaderboard_spec.LeaderboardSpec` itself (all its runs).
        store: where results go.
        backend: ``"local"`` (worker processes) or ``"ray"``.
        workers: local worker processes (default: chosen by the local backend from the idle
            cores and the measured work); ignored by Ray.
        ray_address: the Ray cluster to use (default: ``RAY_ADDRESS`` or a local Ray).
        progress: show progress over runs and rounds on ``log``: tqdm bars on a terminal, else a plain
            line every half minute (:mod:`~tokenized_bandit_gym.evaluation.progress`).
        log: where progress and failures are reported (default: stderr).
        lease_seconds: how long a claimed run stays leased without a heartbeat.

    Returns:
        Counts of skipped and stored runs, and the failures.

    Raises:
        StoreError: the store fails its check (:meth:`ResultsStore.verify`); nothing is written to it.
        TypeError: ``runs`` is not RunSpecs or a spec (``spec.runs`` without the call, say), or ``store`` is
            not a :class:`ResultsStore`.
    """
    runs = as_runs(runs)
    if not isinstance(store, ResultsStore):
        raise TypeError(f"store must be a ResultsStore (e.g. ResultsStore('results.sqlite')), got {store!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    log = log if log is not None else sys.stderr
    check = store.verify()
    if not check.ok:
        raise StoreError(
            f"the results store {str(store.path)!r} fails its check ({check.summary()}); nothing was written to it. "
            f"Run `tbg verify --store {store.path}` for the damaged runs, or pass another --store"
        )
    store.relabel(runs)
    pending = pending_runs(runs, store)
    unique = len({run.key for run in runs})
    summary = RunSummary(total=unique, skipped=unique - len(pending))
    if not pending:
        return summary
    holder = LeaseHolder()
    claims = ClaimedRuns(pending, store, holder, lease_seconds)
    runs_bar = ProgressCounter(len(pending), "runs", "run", enabled=progress, stream=log, position=0)
    rounds_bar = ProgressCounter(
        sum(run.rounds for run in pending), "rounds", "round", enabled=progress, stream=log, position=1
    )
    rounds_of = {run.key: run.rounds for run in pending}
    credited: dict[str, int] = {}

    def advance(key: str, rounds: int) -> None:
        # A run's credit stops at its rounds: a worker's report may arrive after the run's outcome
        # (it is queued), and a vector env's last step may end more rounds than the run records.
        added = max(0, min(rounds, rounds_of.get(key, 0) - credited.get(key, 0)))
        credited[key] = credited.get(key, 0) + added
        rounds_bar.update(added)

    outcomes: Iterator[RunRecord | RunFailure]
    if backend == "local":
        from tokenized_bandit_gym.evaluation.local_backend import run_local

        outcomes = run_local(claims, workers=None if workers is None else min(workers, len(pending)), progress=advance)
    else:
        from tokenized_bandit_gym.evaluation.ray_backend import run_ray

        outcomes = run_ray(claims, address=ray_address, progress=advance)
    try:
        with _heartbeat(store, holder, lease_seconds), contextlib.closing(outcomes):  # type: ignore[type-var]
            for outcome in outcomes:
                key = outcome.spec.key
                advance(key, outcome.spec.rounds)
                if isinstance(outcome, RunFailure):
                    store.release(holder, key)
                    summary.failures.append(outcome)
                    runs_bar.write(
                        f"run failed: {outcome.spec.task_label} / {outcome.spec.agent_label} / seed "
                        f"{outcome.spec.seed}: {outcome.error}\n{outcome.traceback}"
                    )
                elif store.add(outcome):
                    summary.stored += 1
                else:
                    summary.discarded += 1
                runs_bar.update(1)
    finally:
        rounds_bar.close()
        runs_bar.close()
    stored_now = len(store.keys() & {run.key for run in pending})
    summary.stored_elsewhere = stored_now - summary.stored
    return summary
