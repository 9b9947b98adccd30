"""Fault injection on the results store: readers beside a writer, ``kill -9``, several writers.

The counts of what these cases tried, and what held, are recorded in ``docs/STORE_INTEGRITY.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

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


def run_tbg_with_file_size_limit(arguments: list[str], limit_bytes: int) -> subprocess.CompletedProcess[str]:
    """`tbg ARGUMENTS` in a process whose files cannot grow past ``limit_bytes`` (a full disk, RLIMIT_FSIZE)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", *arguments]
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        command, cwd=REPO, env=environment, preexec_fn=limit, capture_output=True, text=True, timeout=300
    )


def ends_with_one_error_line(stderr: str) -> bool:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return bool(lines) and lines[-1].startswith("tbg: error: ") and "Traceback" not in stderr


@pytest.mark.slow
def test_a_full_disk_during_tbg_run_ends_with_one_line_and_loses_no_committed_run(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.toml", rounds=2000, seeds=40)
    store = tmp_path / "full.sqlite"
    arguments = ["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--no-report"]
    finished = run_tbg_with_file_size_limit(arguments, 400_000)
    assert finished.returncode == 2, finished.stderr[-2000:]
    assert ends_with_one_error_line(finished.stderr), finished.stderr[-2000:]
    with ResultsStore(store, create=False) as reader:
        check = reader.verify()
    assert check.ok and 0 < check.sound < 40, check.summary()


def test_a_full_disk_while_the_report_is_written_leaves_the_old_report_whole(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with ResultsStore(store) as opened:
        for seed in range(2):
            opened.add(make_record("Task", "agent", seed, [0.5] * 20))
    out = tmp_path / "report"
    assert main(["report", "--store", str(store), "--out", str(out)]) == 0
    before = {item.name: item.read_bytes() for item in out.iterdir()}
    finished = run_tbg_with_file_size_limit(["report", "--store", str(store), "--out", str(out)], 20_000)
    assert finished.returncode == 2 and ends_with_one_error_line(finished.stderr), finished.stderr[-2000:]
    assert {item.name: item.read_bytes() for item in out.iterdir()} == before
    assert [item.name for item in tmp_path.iterdir() if item.name.startswith(".")] == []  # no partial folder left


def test_ctrl_c_during_a_report_leaves_the_old_report_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tokenized_bandit_gym.evaluation import leaderboard_report

    store = tmp_path / "s.sqlite"
    with ResultsStore(store) as opened:
        opened.add(make_record("Task", "agent", 0, [0.5] * 20))
    out = tmp_path / "report"
    assert main(["report", "--store", str(store), "--out", str(out)]) == 0
    before = {item.name: item.read_bytes() for item in out.iterdir()}
    with ResultsStore(store) as opened:
        opened.add(make_record("Task", "agent", 1, [0.25] * 20))
    original = leaderboard_report.write_report

    def interrupted(leaderboard: object, out_dir: Path) -> None:
        original(leaderboard, out_dir)  # every new file is written, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(leaderboard_report, "write_report", interrupted)
    capsys.readouterr()
    assert main(["report", "--store", str(store), "--out", str(out)]) == 130
    assert (
        capsys.readouterr().err.strip()
        == "tbg: error: interrupted; no report was written (an earlier one is unchanged)"
    )
    assert {item.name: item.read_bytes() for item in out.iterdir()} == before
    monkeypatch.setattr(leaderboard_report, "write_report", original)
    assert main(["report", "--store", str(store), "--out", str(out)]) == 0
    assert "2 runs" in (out / "leaderboard.md").read_text()


def test_a_report_never_replaces_a_folder_holding_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    with ResultsStore(store) as opened:
        opened.add(make_record("Task", "agent", 0, [0.5] * 20))
    assert main(["report", "--store", str(store), "--out", str(tmp_path)]) == 2
    assert "holds files that are not a report" in capsys.readouterr().err
    assert sorted(item.name for item in tmp_path.iterdir()) == ["s.sqlite"]


def test_a_read_only_store_and_sqlite_write_errors_end_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    with ResultsStore(store):
        pass
    spec = write_spec(tmp_path / "spec.toml", rounds=5, seeds=1)
    arguments = ["run", str(spec), "--store", str(store), "--workers", "1", "--no-progress", "--no-report"]
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: mode & os.W_OK == 0 and real_access(path, mode))
    assert main(arguments) == 2
    assert "is read-only" in capsys.readouterr().err
    monkeypatch.setattr(os, "access", real_access)

    def full(self: ResultsStore, record: RunRecord) -> bool:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ResultsStore, "add", full)
    assert main(arguments) == 2
    assert ends_with_one_error_line(capsys.readouterr().err)


def test_labels_with_newlines_and_pipes_keep_every_markdown_table_row_whole(tmp_path: Path) -> None:
    from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
    from tokenized_bandit_gym.evaluation.leaderboard_report import markdown_report

    records = [make_record("Task\nsecond line", "agent | one\r\nb", seed, [0.5] * 10) for seed in range(2)]
    records += [make_record("Task\nsecond line", "other", seed, [0.25] * 10) for seed in range(2)]
    text = markdown_report(build_leaderboard(records))
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert table_lines
    for line in table_lines:
        assert line.endswith("|"), line
    assert len(table_lines) > 4 and "agent \\| one<br>b" in text
    assert not any(line.startswith(("second line", "b")) for line in text.splitlines()), "a label split a line"
    for table in text.split("\n\n"):
        rows = [line.replace("\\|", "") for line in table.splitlines() if line.startswith("|")]
        assert len({row.count("|") for row in rows}) <= 1, table  # every row of a table has as many cells


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without a usable CUDA device")
def test_check_model_on_a_missing_cuda_device_ends_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-model", "stories260K", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tbg check-model: error: device='cuda' is not available") and "Traceback" not in err


def test_a_binary_queries_file_is_named_in_a_clear_error(tmp_path: Path) -> None:
    from tokenized_bandit_gym.llm.query_sources import resolve_queries

    for name in ("queries.txt", "queries.csv", "queries.jsonl"):
        path = tmp_path / name
        path.write_bytes(b"\xff\xfe\x00\x01binary\x80")
        with pytest.raises(ValueError, match=f"the query file '{path}' is not UTF-8 text"):
            resolve_queries(str(path))
