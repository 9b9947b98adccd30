"""Run leaderboard runs as Ray tasks, on an existing cluster or a local Ray.

Ray is an optional dependency (``pip install "tokenized-bandit-gym[distributed]"``). Each run is
one task (``num_cpus=1``) calling the same worker function as the local backend, so the same
seeds give the same results; the driver stores each result as soon as it finishes. Workers on
other machines need the package (and its version) installed.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from tokenized_bandit_gym.evaluation.execute_run import ProgressCallback, execute_run
from tokenized_bandit_gym.evaluation.run_failure import RunFailure
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec


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


def _ray_task(run: RunSpec) -> RunRecord | RunFailure:
    try:
        return execute_run(run, threads=1)
    except Exception as error:  # noqa: BLE001  (any agent or env error fails this run only)
        return RunFailure(spec=run, error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())


def run_ray(
    runs: Sequence[RunSpec],
    address: str | None = None,
    progress: ProgressCallback | None = None,
) -> Iterator[RunRecord | RunFailure]:
    """Yield each run's record (or failure) as soon as its Ray task finishes.

    Args:
        runs: the runs to play.
        address: a Ray cluster address (``"auto"``, ``"ray://host:10001"``); None connects to
            ``RAY_ADDRESS`` if set, else starts a local Ray that is shut down at the end.
        progress: called with ``(run key, rounds)`` when a run finishes (whole runs only).
    """
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(_ray_task)
    references = {remote.remote(run): run for run in runs}
    try:
        while references:
            done, _ = ray.wait(list(references), num_returns=1)
            for reference in done:
                run = references.pop(reference)
                outcome = ray.get(reference)
                if progress is not None:
                    progress(run.key, run.rounds)
                yield outcome
    finally:
        for reference in references:
            ray.cancel(reference, force=True)
        if started_here:
            ray.shutdown()
