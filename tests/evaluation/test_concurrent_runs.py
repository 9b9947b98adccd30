"""Several `tbg run`s on one store split the sweep through leases; labels follow the spec; network filesystems warn."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.evaluation.records import make_record
from tests.evaluation.test_resume import stored_count, write_spec
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.results_store import (
    LeaseHolder,
    NetworkFilesystemWarning,
    ResultsStore,
    network_filesystem,
)

REPO = Path(__file__).resolve().parents[2]


def labelled_spec(path: Path, task_label: str, agent_label: str) -> Path:
    """Two seeds of Random on TMAB with these labels."""
    write_spec(path, rounds=5, seeds=2)
    text = path.read_text().replace("[[agent]]", f'label = "{task_label}"\n\n[[agent]]')
    path.write_text(text + f'label = "{agent_label}"\n')
    return path


def arrays_by_key(store: Path) -> dict[str, list[bytes]]:
    with ResultsStore(store, create=False) as opened:
        return opened.result_bytes()


def lease_pids(store: Path) -> set[int]:
    try:
        connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5.0)
        try:
            return {row[0] for row in connection.execute("SELECT pid FROM run_leases")}
        finally:
            connection.close()
    except sqlite3.Error:
        return set()


def start_tbg_run(spec: Path, store: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec), "--store", str(store)]
    command += ["--workers", "1", "--no-progress", "--no-report"]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_split_the_sweep_and_survive_a_kill_9(tmp_path: Path) -> None:
    total = 10
    spec = write_spec(tmp_path / "spec.toml", rounds=300, seeds=total)
    store = tmp_path / "shared.sqlite"
    with ResultsStore(store):
        pass  # created up front, so both processes open the same file
    doomed, survivor = start_tbg_run(spec, store), start_tbg_run(spec, store)
    try:
        deadline = time.monotonic() + 240
        # kill -9 the first process while it holds a lease on a run it is playing
        while not (stored_count(store) >= 1 and doomed.pid in lease_pids(store)):
            if doomed.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the first process never held a lease while runs remained")
            time.sleep(0.01)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=60)
        _, err = survivor.communicate(timeout=300)
    finally:
        for process in (doomed, survivor):
            if process.poll() is None:
                process.kill()
    assert survivor.returncode == 0, err
    summary = re.search(r"(\d+) runs stored, (\d+) already in the store(?:, (\d+) stored by other processes)?", err)
    assert summary is not None, err
    stored_here, already = int(summary.group(1)), int(summary.group(2))
    elsewhere = int(summary.group(3) or 0)
    assert stored_here + already + elsewhere == total and stored_here >= 1
    assert "discarded" not in err
    assert lease_pids(store) == set()  # every lease was released or consumed
    shared = arrays_by_key(store)
    assert len(shared) == total
    connection = sqlite3.connect(store)
    assert connection.execute("SELECT COUNT(*) FROM run_arrays").fetchone()[0] == total * 6
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    connection.close()

    alone = tmp_path / "alone.sqlite"
    assert main(["run", str(spec), "--store", str(alone), "--workers", "1", "--no-progress", "--no-report"]) == 0
    assert arrays_by_key(alone) == shared


def test_claims_never_hand_one_run_to_two_holders(tmp_path: Path) -> None:
    keys = [f"run{index}" for index in range(3)]
    first, second = LeaseHolder(), LeaseHolder()
    with ResultsStore(tmp_path / "r.sqlite") as store, ResultsStore(tmp_path / "r.sqlite") as other:
        assert store.claim(keys, first, lease_seconds=60) == ("run0", 0)
        assert other.claim(keys, second, lease_seconds=60) == ("run1", 1)
        assert store.claim(keys[:2], first, lease_seconds=60) == (None, 1)  # run0 is its own, run1 is held
        other.release(second, "run1")
        assert store.claim(keys[1:], first, lease_seconds=60) == ("run1", 0)
        store.release(first)
        assert other.claim(keys, second, lease_seconds=60) == ("run0", 0)


def test_stored_runs_are_never_claimed_and_storing_ends_the_lease(tmp_path: Path) -> None:
    record = make_record("A", "random", 0, [1.0, 2.0])
    holder = LeaseHolder()
    with ResultsStore(tmp_path / "r.sqlite") as store:
        assert store.claim([record.spec.key], holder, 60) == (record.spec.key, 0)
        assert store.add(record)
        assert store.claim([record.spec.key], LeaseHolder(), 60) == (None, 0)
        assert store._connection.execute("SELECT COUNT(*) FROM run_leases").fetchone()[0] == 0


def test_leases_of_dead_or_silent_holders_are_claimed_again(tmp_path: Path) -> None:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    dead, silent, alive = LeaseHolder(), LeaseHolder(), LeaseHolder()
    dead.pid = finished.pid  # a process of this machine that no longer exists
    silent.hostname = "another-machine"  # cannot be checked: only its heartbeat counts
    with ResultsStore(tmp_path / "r.sqlite") as store:
        assert store.claim(["a"], dead, 60) == ("a", 0)
        assert store.claim(["b"], silent, 60) == ("b", 0)
        assert store.claim(["b", "a"], alive, 60) == ("a", 1)  # dead holder: taken over at once; b is held
        time.sleep(0.05)
        assert store.claim(["b"], alive, lease_seconds=60) == (None, 1)
        assert store.claim(["b"], alive, lease_seconds=0.01) == ("b", 0)  # no heartbeat for too long
        store.renew_leases(alive)
        assert store.claim(["a", "b"], LeaseHolder(), lease_seconds=1) == (None, 2)


MOUNTS = r"""sysfs /sys sysfs rw,nosuid 0 0
/dev/sda1 / ext4 rw,relatime 0 0
server:/export /mnt/nfs nfs4 rw,vers=4.2 0 0
//nas/share /mnt/smb cifs rw 0 0
user@host:/data /home/me/remote fuse.sshfs rw 0 0
/dev/sdb1 /mnt/nfs/local-disk xfs rw 0 0
tmpfs /mnt/with\040space nfs rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/mnt/nfs/results.sqlite", "nfs4"),
        ("/mnt/nfs/deep/er/r.sqlite", "nfs4"),
        ("/mnt/smb/r.sqlite", "cifs"),
        ("/home/me/remote/r.sqlite", "fuse.sshfs"),
        ("/mnt/nfs/local-disk/r.sqlite", None),  # a local disk mounted inside the NFS tree
        ("/mnt/nfsother/r.sqlite", None),  # a prefix of the name is not a parent folder
        ("/mnt/with space/r.sqlite", "nfs"),
        ("/home/me/r.sqlite", None),
    ],
)
def test_network_filesystem_detection(path: str, expected: str | None) -> None:
    assert network_filesystem(path, mounts=MOUNTS) == expected


def test_store_warns_when_detection_says_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tokenized_bandit_gym.evaluation.results_store as results_store

    monkeypatch.setattr(results_store, "network_filesystem", lambda path, mounts=None: "nfs4")
    with pytest.warns(NetworkFilesystemWarning, match=r"network filesystem \(nfs4\).*SQLite's locking is unsafe"):
        ResultsStore(tmp_path / "r.sqlite").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ResultsStore(tmp_path / "r.sqlite", create=False).close()  # reading only: no warning


def test_labels_follow_the_spec_on_a_resumed_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "r.sqlite"
    old = labelled_spec(tmp_path / "old.toml", "Old task", "Old agent")
    assert main(["run", str(old), "--store", str(store), "--no-progress", "--no-report"]) == 0
    new = labelled_spec(tmp_path / "new.toml", "New task", "New agent")
    capsys.readouterr()
    assert main(["run", str(new), "--store", str(store), "--no-progress", "--out", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr()
    assert "0 runs stored, 2 already in the store" in printed.err
    assert "New agent" in printed.out and "Old agent" not in printed.out
    with ResultsStore(store, create=False) as opened:
        labels = {(record.spec.task_label, record.spec.agent_label) for record in opened.records()}
    assert labels == {("New task", "New agent")}
    # the report of the old spec shows the old spec's labels, whatever the store says
    assert main(["report", "--store", str(store), "--spec", str(old), "--out", str(tmp_path / "c")]) == 0
    printed = capsys.readouterr()
    assert "Old agent" in printed.out and "New agent" not in printed.out


def test_thread_settings_are_stored_and_equal_for_any_worker_count(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.toml", rounds=20, seeds=2)
    settings = {}
    environment = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    for workers in (1, 2):
        store = tmp_path / f"w{workers}.sqlite"
        argv = ["run", str(spec), "--store", str(store), "--workers", str(workers), "--no-progress", "--no-report"]
        assert main(argv) == 0
        with ResultsStore(store, create=False) as opened:
            settings[workers] = [dict(record.metadata["thread_settings"]) for record in opened.records()]
    for stored in settings[1] + settings[2]:
        assert set(stored.pop("thread_pools").values()) == {1}  # every BLAS/OpenMP pool loaded: one thread
    expected = {"torch_threads": 1, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    assert settings[1] == settings[2] == [expected, expected]
    assert {name: os.environ.get(name) for name in environment} == environment  # restored after the runs
