"""Fault injection on the results store: readers beside a writer, ``kill -9``, several writers.

The counts of what these cases tried, and what held, are recorded in ``docs/STORE_INTEGRITY.md``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.results_store import ResultsStore

REPO = Path(__file__).resolve().parents[2]

# A writer as `tbg run` is one: the store, the lease heartbeat's own connection in a thread, and a
# commit per finished run. It prints each key once its transaction has committed.
WRITER = """
import sys, time
from tests.evaluation.records import make_record
from tokenized_bandit_gym.evaluation.leaderboard_runner import _heartbeat
from tokenized_bandit_gym.evaluation.results_store import LeaseHolder, ResultsStore

store_path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with ResultsStore(store_path) as store, _heartbeat(store, LeaseHolder(), 60.0):
    for seed in range(count):
        record = make_record(name, "writer", seed, [0.5] * 200)
        store.add(record)
        print(record.spec.key, flush=True)
        time.sleep(0.01)
    print("done", flush=True)
    time.sleep(600)  # holds the store open until killed
"""


def start_writer(store: Path, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), name, str(count)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def deleted_journals(pid: int) -> list[str]:
    """The store files that process ``pid`` holds open although they were unlinked."""
    folder = Path(f"/proc/{pid}/fd")
    targets = []
    for descriptor in folder.iterdir():
        try:
            targets.append(os.readlink(descriptor))
        except OSError:
            continue
    return [target for target in targets if ".sqlite" in target and target.endswith("(deleted)")]


def open_close_reader_keys(store: Path) -> set[str]:
    """What a `tbg report` sees: open the store, read its keys, close it."""
    with ResultsStore(store, create=False) as reader:
        return reader.keys()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see a process's open files")
def test_readers_never_unlink_a_live_writers_journal_and_kill_9_loses_no_committed_run(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with ResultsStore(store):
        pass
    writer = start_writer(store, "Task", 400)
    committed: list[str] = []
    seen: set[str] = set()
    unlinked: list[str] = []
    try:
        assert writer.stdout is not None
        output = writer.stdout
        committed.append(output.readline().strip())  # the heartbeat has started by now
        collector = threading.Thread(target=lambda: committed.extend(line.strip() for line in output), daemon=True)
        collector.start()
        for _ in range(60):
            seen |= open_close_reader_keys(store)
            unlinked += deleted_journals(writer.pid)
            time.sleep(0.02)
        committed_before_kill = [key for key in committed if key != "done"]
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert unlinked == [], f"the writer's journal was unlinked while it ran: {sorted(set(unlinked))}"
    assert len(seen) > 0 and len(committed_before_kill) > 5
    left = open_close_reader_keys(store)
    assert seen <= left, f"{len(seen - left)} runs a reader had seen were lost by kill -9"
    lost = set(committed_before_kill) - left
    assert not lost, f"{len(lost)} committed runs were lost by kill -9"


@pytest.mark.slow
def test_two_writers_and_a_sqlite3_reader_leave_a_sound_store(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with ResultsStore(store):
        pass
    writers = [start_writer(store, name, 150) for name in ("A", "B")]
    try:
        deadline = time.monotonic() + 120
        reads = 0
        while any(writer.poll() is None for writer in writers) and time.monotonic() < deadline:
            connection = sqlite3.connect(store, timeout=30.0)
            try:
                connection.execute("SELECT COUNT(*) FROM runs").fetchone()
                connection.execute("SELECT SUM(LENGTH(data)) FROM run_arrays").fetchone()
            finally:
                connection.close()
            reads += 1
            with ResultsStore(store, create=False) as reader:
                if len(reader) == 300:
                    break
    finally:
        for writer in writers:
            writer.send_signal(signal.SIGKILL)
            writer.wait(timeout=30)
    errors = [writer.stderr.read() for writer in writers if writer.stderr is not None]
    assert not any("Error" in text for text in errors), errors
    connection = sqlite3.connect(store)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 300
    finally:
        connection.close()
    assert reads > 10
