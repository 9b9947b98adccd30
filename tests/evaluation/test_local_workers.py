"""The local backend's default worker count: workers only where they pay for their start-up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tokenized_bandit_gym.evaluation import local_backend
from tokenized_bandit_gym.evaluation.execute_run import QueuedRuns
from tokenized_bandit_gym.evaluation.run_record import RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec


def _runs(count: int, rounds: int = 3) -> list[RunSpec]:
    return [RunSpec("TokenizedMultiArmedBandit-v0", {}, "random", {}, seed, rounds) for seed in range(count)]


@pytest.mark.parametrize(
    ("rounds_left", "seconds_per_round", "cores", "expected"),
    [
        ([100] * 4, 1.0, 2, 2),  # 400 s of work: two workers save 197 s
        ([100] * 4, 1e-3, 2, 1),  # 0.4 s of work: a worker's start-up alone costs more
        ([10_000], 1.0, 4, 1),  # one run left: nothing to share
        ([100] * 4, 1.0, 1, 1),  # no idle core
        ([100] * 3, 1.0, 8, 3),  # never more workers than runs
        (None, 1e-3, 3, 3),  # a source that cannot say what is left: the idle cores
    ],
)
def test_workers_are_started_only_when_the_work_left_outweighs_their_start_up(
    rounds_left: list[int] | None, seconds_per_round: float, cores: int, expected: int
) -> None:
    assert local_backend.workers_worth_starting(rounds_left, seconds_per_round, cores) == expected


def test_the_break_even_is_one_start_up_since_this_process_keeps_playing() -> None:
    start = local_backend.WORKER_START_SECONDS
    for workers in (2, 3, 4):
        break_even = start  # (work + (w - 1) start) / w == work
        rounds = [1000] * workers
        assert local_backend.workers_worth_starting(rounds, 1.01 * break_even / sum(rounds), workers) == workers
        assert local_backend.workers_worth_starting(rounds, 0.99 * break_even / sum(rounds), workers) == 1


@pytest.mark.parametrize(("load", "expected"), [(0.0, 4), (1.0, 4), (2.0, 3), (3.4, 2), (9.0, 1)])
def test_idle_cores_discount_the_load_of_other_processes(
    monkeypatch: pytest.MonkeyPatch, load: float, expected: int
) -> None:
    monkeypatch.setattr(local_backend, "available_cores", lambda: 4)
    monkeypatch.setattr(local_backend.os, "getloadavg", lambda: (load, load, load))
    assert local_backend.idle_cores() == expected


def _record_pool(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replace the pool by this process (no spawn in a unit test); returns the worker counts it was asked for."""
    asked: list[int] = []

    def pool(source, workers, progress) -> Iterator:  # noqa: ANN001
        asked.append(workers)
        yield from local_backend._run_in_this_process(source, progress)

    monkeypatch.setattr(local_backend, "_run_in_pool", pool)
    monkeypatch.setattr(local_backend, "idle_cores", lambda: 2)
    return asked


def test_small_work_by_default_stays_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _record_pool(monkeypatch)
    runs = _runs(4)
    outcomes = list(local_backend.run_local(runs))
    assert asked == []
    assert all(isinstance(outcome, RunRecord) for outcome in outcomes)
    assert sorted(outcome.spec.seed for outcome in outcomes) == [run.seed for run in runs]


def test_large_work_by_default_goes_to_workers_after_the_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _record_pool(monkeypatch)
    monkeypatch.setattr(local_backend, "WORKER_START_SECONDS", 0.0)  # any measured work outweighs it
    runs = _runs(4)
    outcomes = list(local_backend.run_local(runs))
    assert asked == [2]
    assert sorted(outcome.spec.seed for outcome in outcomes) == [run.seed for run in runs]


def test_an_explicit_worker_count_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _record_pool(monkeypatch)
    list(local_backend.run_local(_runs(3), workers=2))
    assert asked == [2]


def test_queued_runs_say_what_is_left() -> None:
    runs = QueuedRuns([*_runs(2, rounds=5), *_runs(1, rounds=7)])
    assert runs.rounds_left() == [5, 5, 7]
    runs.next_run()
    assert runs.rounds_left() == [5, 7]


def test_a_sweep_by_default_claims_and_stores_every_run(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from tokenized_bandit_gym.evaluation.leaderboard_runner import ClaimedRuns, run_leaderboard
    from tokenized_bandit_gym.evaluation.results_store import LeaseHolder, ResultsStore

    asked = _record_pool(monkeypatch)
    runs = _runs(3, rounds=4)
    with ResultsStore(tmp_path / "claimed.sqlite") as store:
        claims = ClaimedRuns(runs, store, LeaseHolder(), lease_seconds=60.0)
        assert claims.rounds_left() == [4, 4, 4]
        claims.next_run()
        assert claims.rounds_left() == [4, 4]
    with ResultsStore(tmp_path / "results.sqlite") as store:
        summary = run_leaderboard(runs, store, progress=False)
        assert asked == []  # three runs of four rounds: no worker pays for its start-up
        assert summary.stored == 3 and not summary.failures
        assert store.keys() == {run.key for run in runs}


def test_this_process_plays_beside_the_spawned_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers: one run in this process's thread, the others in one spawned process; all are stored."""
    import threading

    played_here: list[int] = []
    real_execute_run = local_backend.execute_run

    def execute_run_here(run, **kwargs):  # noqa: ANN001, ANN202
        played_here.append(threading.get_ident())
        return real_execute_run(run, **kwargs)

    monkeypatch.setattr(local_backend, "execute_run", execute_run_here)
    runs = _runs(4, rounds=200)
    seen: dict[str, int] = {}
    outcomes = list(
        local_backend.run_local(runs, workers=2, progress=lambda key, n: seen.__setitem__(key, seen.get(key, 0) + n))
    )
    assert all(isinstance(outcome, RunRecord) for outcome in outcomes), outcomes
    assert sorted(outcome.spec.seed for outcome in outcomes) == [run.seed for run in runs]
    assert played_here and threading.get_ident() not in played_here  # played here, in the pool's thread
    assert len(played_here) < len(runs)  # and not every run: the spawned worker played some
    assert {run.key for run in runs} == set(seen)


def test_runs_are_claimed_most_expensive_first(tmp_path) -> None:
    from tokenized_bandit_gym.evaluation.leaderboard_runner import LLM_ROUND_WEIGHT, pending_runs
    from tokenized_bandit_gym.evaluation.results_store import ResultsStore

    cheap = RunSpec("TokenizedMultiArmedBandit-v0", {}, "random", {}, 0, 10)
    long = RunSpec("TokenizedMultiArmedBandit-v0", {}, "random", {}, 0, 1000)
    llm = RunSpec("TokenizedAlignment-v0", {}, "random", {}, 0, 1000 // LLM_ROUND_WEIGHT + 1)
    with ResultsStore(tmp_path / "order.sqlite") as store:
        assert pending_runs([cheap, long, llm, cheap], store) == [llm, long, cheap]
