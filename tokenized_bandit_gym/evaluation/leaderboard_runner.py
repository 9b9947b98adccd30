"""Run every task x agent x seed of a spec that the store does not hold yet, storing each as it ends."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from tqdm.auto import tqdm

from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.evaluation.run_failure import RunFailure
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec

BACKENDS = ("local", "ray")


@dataclass
class RunSummary:
    """What one ``tbg run`` did.

    Attributes:
        total: runs in the spec.
        skipped: runs already in the store (not rerun).
        stored: runs played and stored now.
        failures: runs that raised (not stored; a rerun tries them again).
    """

    total: int
    skipped: int
    stored: int = 0
    failures: list[RunFailure] = field(default_factory=list)


def pending_runs(runs: Sequence[RunSpec], store: ResultsStore) -> list[RunSpec]:
    """The runs whose key is not in the store, without duplicates, in order."""
    stored = store.keys()
    seen: set[str] = set()
    pending = []
    for run in runs:
        if run.key not in stored and run.key not in seen:
            seen.add(run.key)
            pending.append(run)
    return pending


def run_leaderboard(
    runs: Sequence[RunSpec],
    store: ResultsStore,
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    log: TextIO | None = None,
) -> RunSummary:
    """Play the runs not yet in ``store`` and store each one as soon as it finishes.

    Interrupting (Ctrl-C, ``kill``) loses only the runs in progress: every finished run is
    committed in its own transaction, and calling this again with the same runs resumes.

    Args:
        runs: typically ``spec.runs()``.
        store: where results go.
        backend: ``"local"`` (worker processes) or ``"ray"``.
        workers: local worker processes (default: all cores); ignored by Ray.
        ray_address: the Ray cluster to use (default: ``RAY_ADDRESS`` or a local Ray).
        progress: show progress bars over runs and rounds (on stderr).
        log: where failures are reported (default: stderr).

    Returns:
        Counts of skipped and stored runs, and the failures.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    log = log if log is not None else sys.stderr
    pending = pending_runs(runs, store)
    unique = len({run.key for run in runs})
    summary = RunSummary(total=unique, skipped=unique - len(pending))
    if not pending:
        return summary
    runs_bar = tqdm(total=len(pending), desc="runs", unit="run", disable=not progress, position=0)
    rounds_bar = tqdm(
        total=sum(run.rounds for run in pending), desc="rounds", unit="round", disable=not progress, position=1
    )
    credited: dict[str, int] = {}

    def advance(key: str, rounds: int) -> None:
        credited[key] = credited.get(key, 0) + rounds
        rounds_bar.update(rounds)

    outcomes: Iterator[RunRecord | RunFailure]
    if backend == "local":
        from tokenized_bandit_gym.evaluation.local_backend import run_local

        outcomes = run_local(pending, workers=workers, progress=advance)
    else:
        from tokenized_bandit_gym.evaluation.ray_backend import run_ray

        outcomes = run_ray(pending, address=ray_address, progress=advance)
    try:
        with contextlib.closing(outcomes):  # type: ignore[type-var]
            for outcome in outcomes:
                key = outcome.spec.key
                rounds_bar.update(outcome.spec.rounds - credited.get(key, 0))
                credited[key] = outcome.spec.rounds
                if isinstance(outcome, RunFailure):
                    summary.failures.append(outcome)
                    tqdm.write(
                        f"run failed: {outcome.spec.task_label} / {outcome.spec.agent_label} / seed "
                        f"{outcome.spec.seed}: {outcome.error}\n{outcome.traceback}",
                        file=log,
                    )
                else:
                    summary.stored += int(store.add(outcome))
                runs_bar.update(1)
    finally:
        rounds_bar.close()
        runs_bar.close()
    return summary
