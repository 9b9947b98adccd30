"""Interrupted runs lose nothing finished; reruns resume without duplicates; workers do not change results."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.evaluation.run_record import DETERMINISTIC_ARRAYS

REPO = Path(__file__).resolve().parents[2]

SPEC = """
rounds = {rounds}
seeds = {seeds}

[[task]]
id = "TokenizedMultiArmedBandit-v0"

[[agent]]
name = "random"
"""


def write_spec(path: Path, rounds: int, seeds: int) -> Path:
    path.write_text(SPEC.format(rounds=rounds, seeds=seeds))
    return path


def stored_count(store: Path) -> int:
    try:
        connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5.0)
        try:
            return int(connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        finally:
            connection.close()
    except sqlite3.Error:
        return 0


def child_pids(pid: int) -> list[int]:
    """Child processes of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(item) for item in children.read_text().split()] if children.exists() else []


def interrupt_after_first_run(
    spec: Path, store: Path, sig: int, workers: int
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """Start ``tbg run`` in a subprocess, send ``sig`` once one run is stored, wait for it to end.

    Returns the finished process and the pids of its children just before the signal.
    """
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec), "--store", str(store)]
    command += ["--workers", str(workers), "--no-progress", "--no-report"]
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background of a non-interactive shell (as CI may be) inherits
        # an ignored SIGINT, and Python then never raises KeyboardInterrupt; a user's terminal
        # Ctrl-C reaches a process whose SIGINT is at its default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 240
    try:
        while process.poll() is None and stored_count(store) < 1:
            if time.monotonic() > deadline:
                pytest.fail("no run finished within 240 s")
            time.sleep(0.02)
        children = child_pids(process.pid)
        process.send_signal(sig)
        process.wait(timeout=120)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return subprocess.CompletedProcess(command, process.returncode, out, err), children


def rows_by_key(store: Path) -> dict[str, list[tuple]]:
    with ResultsStore(store, create=False) as opened:
        rows: dict[str, list[tuple]] = {}
        for row in opened.raw_rows():
            rows.setdefault(row[0], []).append(row)
    return rows


@pytest.mark.parametrize(
    ("sig", "workers"),
    [
        (signal.SIGKILL, 2),
        (signal.SIGINT, 1),
        (signal.SIGTERM, 2),
        pytest.param(signal.SIGKILL, 1, marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, 2, marks=pytest.mark.slow),
        pytest.param(signal.SIGTERM, 1, marks=pytest.mark.slow),
    ],
    ids=[
        "kill-9-2-workers",
        "ctrl-c-1-worker",
        "sigterm-2-workers",
        "kill-9-1-worker",
        "ctrl-c-2-workers",
        "sigterm-1-worker",
    ],
)
def test_interrupted_run_resumes_without_loss_or_duplicates(tmp_path: Path, sig: int, workers: int) -> None:
    total = 10
    # Runs long enough (about 1 s each on an idle 2-core machine) that the signal always lands
    # while runs remain; with 100 rounds an idle machine once finished all ten first.
    spec = write_spec(tmp_path / "spec.toml", rounds=400, seeds=total)
    store = tmp_path / "results.sqlite"
    completed, children = interrupt_after_first_run(spec, store, sig, workers)
    if sig in (signal.SIGINT, signal.SIGTERM):
        # SIGTERM is handled as Ctrl-C is: the same message, a clean pool shutdown, no leaked semaphores
        assert completed.returncode == 128 + sig, completed.stderr
        assert "interrupted: " in completed.stderr and "rerun the same command to resume" in completed.stderr
        assert "leaked" not in completed.stderr and "Traceback" not in completed.stderr, completed.stderr
    else:
        assert completed.returncode == -signal.SIGKILL
    time.sleep(2.0)
    assert [child for child in children if Path(f"/proc/{child}").exists()] == [], "orphaned workers"
    before = rows_by_key(store)
    assert 1 <= len(before) < total, "the interruption came too late to test anything"

    assert main(["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--no-report"]) == 0
    after = rows_by_key(store)
    assert len(after) == total
    with ResultsStore(store, create=False) as opened:
        assert len(opened) == total
        assert {run.seed for run in (record.spec for record in opened.records())} == set(range(total))
    for key, rows in before.items():
        assert after[key] == rows  # finished runs are byte-identical after the rerun
    connection = sqlite3.connect(store)
    assert connection.execute("SELECT COUNT(*) FROM run_arrays").fetchone()[0] == total * 6
    connection.close()


def test_two_workers_give_the_same_bytes_as_one(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.toml", rounds=40, seeds=4)
    stores = {}
    for workers in (1, 2):
        stores[workers] = tmp_path / f"w{workers}.sqlite"
        argv = ["run", str(spec), "--store", str(stores[workers]), "--workers", str(workers), "--no-progress"]
        assert main([*argv, "--no-report"]) == 0
    results = {}
    for workers, store in stores.items():
        with ResultsStore(store, create=False) as opened:
            results[workers] = {
                record.spec.key: [record.arrays[name].tobytes() for name in DETERMINISTIC_ARRAYS]
                for record in opened.records()
            }
    assert len(results[1]) == 4 and results[1] == results[2]
