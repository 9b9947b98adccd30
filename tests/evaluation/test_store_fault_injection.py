"""Fault injection on the results store: readers beside a writer, ``kill -9``, several writers.

The counts of what these cases tried, and what held, are recorded in ``docs/STORE_INTEGRITY.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.evaluation.records import make_record
from tests.evaluation.test_resume import write_spec
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.results_store import ResultsStore, StoreError
from tokenized_bandit_gym.evaluation.run_record import RunRecord

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


def sweep_store(tmp_path: Path) -> Path:
    """A real store: `tbg run` over 3 seeds x 2 agents of a small sweep."""
    spec = write_spec(tmp_path / "spec.toml", rounds=300, seeds=3)
    spec.write_text(spec.read_text() + '\n[[agent]]\nname = "oracle_greedy"\n')
    store = tmp_path / "real.sqlite"
    assert main(["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--no-report"]) == 0
    return store


def run_contents(record: RunRecord) -> tuple[object, ...]:
    """Everything of a run that a report shows."""
    arrays = tuple(record.arrays[name].tobytes() for name in sorted(record.arrays))
    return record.spec, arrays, json.dumps(record.metadata, sort_keys=True, default=repr)


def read_as_a_report_does(path: Path) -> tuple[dict[str, tuple[object, ...]] | None, dict[str, str]]:
    """The runs `tbg report` would show (None when the store is refused) and the runs it names as damaged."""
    try:
        with ResultsStore(path, create=False) as store:
            runs = {record.spec.key: run_contents(record) for record in store.records()}
            return runs, dict(store.damaged)
    except StoreError as error:
        return None, {"": str(error)}


@pytest.mark.slow
def test_a_flipped_bit_anywhere_in_a_real_store_never_changes_a_report_silently(tmp_path: Path) -> None:
    store = sweep_store(tmp_path)
    original = store.read_bytes()
    clean, damaged = read_as_a_report_does(store)
    assert clean is not None and len(clean) == 6 and damaged == {}
    page_size = int.from_bytes(original[16:18], "big")
    pages = len(original) // page_size
    outcomes = {"unchanged": 0, "refused": 0, "damage named": 0}
    silent = []
    copy = tmp_path / "flipped.sqlite"
    for page in range(pages):
        for offset in (0, 3, 5, 8, 100, 1000, 2047, 3000, page_size - 1):  # header, cell pointers, cells, tail
            position = page * page_size + offset
            for bit in (0, 5):
                flipped = bytearray(original)
                flipped[position] ^= 1 << bit
                copy.write_bytes(bytes(flipped))
                for leftover in tmp_path.glob("flipped.sqlite-*"):
                    leftover.unlink()
                runs, named = read_as_a_report_does(copy)
                if runs is None:
                    outcomes["refused"] += 1
                    continue
                changed = {key for key in clean.keys() | runs.keys() if clean.get(key) != runs.get(key)}
                if changed - named.keys():
                    silent.append((page, offset, bit, sorted(changed - named.keys())))
                elif named:
                    outcomes["damage named"] += 1
                else:
                    outcomes["unchanged"] += 1
    assert silent == [], f"reports changed silently after {len(silent)} flips: {silent[:5]}"
    assert outcomes["damage named"] > 0 and pages > 10, outcomes


def test_tbg_verify_names_a_damaged_run_report_leaves_it_out_and_run_refuses_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    with ResultsStore(store) as opened:
        for seed in range(3):
            opened.add(make_record("Task", "agent", seed, [0.25] * 50))
        keys = sorted(opened.keys())
    assert main(["verify", "--store", str(store)]) == 0
    assert "3 runs checked, 3 sound, 0 damaged" in capsys.readouterr().out
    connection = sqlite3.connect(store)
    with connection:  # one changed float in an array, as a flipped bit leaves it
        data = bytearray(
            connection.execute(
                "SELECT data FROM run_arrays WHERE run_key = ? AND name = 'regret'", (keys[1],)
            ).fetchone()[0]
        )
        data[9] ^= 4
        connection.execute(
            "UPDATE run_arrays SET data = ? WHERE run_key = ? AND name = 'regret'", (bytes(data), keys[1])
        )
    connection.close()
    assert main(["verify", "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert f"damaged: run {keys[1]}: its array 'regret' does not match its checksum" in out
    assert "3 runs checked, 2 sound, 1 damaged" in out
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "report")]) == 1
    captured = capsys.readouterr()
    assert f"run {keys[1]} is damaged and left out" in captured.err and "2 runs." in captured.out
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    before = store.read_bytes()
    assert main(["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--no-report"]) == 2
    assert "fails its check (3 runs checked, 2 sound, 1 damaged)" in capsys.readouterr().err
    assert store.read_bytes() == before


def test_a_store_written_before_checksums_gets_them_when_opened_for_writing(tmp_path: Path) -> None:
    store = tmp_path / "old.sqlite"
    shutil.copyfile(Path(__file__).resolve().parent / "data" / "store_schema1.sqlite", store)
    with ResultsStore(store, create=False) as reader:
        assert reader.verify().unverified == 8
        before = {record.spec.key: run_contents(record) for record in reader.records()}
    with ResultsStore(store) as writer:
        check = writer.verify()
        assert (check.ok, check.sound, check.unverified) == (True, 8, 0)
        assert {record.spec.key: run_contents(record) for record in writer.records()} == before


def test_relabelling_keeps_checksums_valid_but_never_blesses_a_damaged_row(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    records = [make_record("Task", "agent", seed, [0.5] * 10) for seed in range(2)]
    with ResultsStore(store) as opened:
        for record in records:
            opened.add(record)
    connection = sqlite3.connect(store)
    with connection:
        connection.execute("UPDATE runs SET wall_time = 1e300 WHERE run_key = ?", (records[0].spec.key,))
    connection.close()
    renamed = [dataclasses.replace(record.spec, task_label="Renamed") for record in records]
    with ResultsStore(store) as opened:
        assert opened.relabel(renamed) == 1
        assert [record.spec.task_label for record in opened.records()] == ["Renamed"]
        assert list(opened.damaged) == [records[0].spec.key]
