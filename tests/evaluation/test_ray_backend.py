"""The Ray backend gives the same bits as the local backend for every agent, also under faults (needs ray).

The parity test runs by default (CI installs the ``distributed`` extra); the fault tests start a
real Ray (a local one killed with the driver, or a two-node cluster losing its worker node) and
are ``slow``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.execute_run import THREAD_ENVIRONMENT
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.evaluation.run_record import DETERMINISTIC_ARRAYS
from tokenized_bandit_gym.registration import load_agent_class

REPO = Path(__file__).resolve().parents[2]
# Agents that need an LLM env (log-probs) and cannot play the synthetic tasks.
LLM_ONLY_AGENTS = {"misaligned_greedy"}
# Small object store and no dashboard: Ray is heavy on a 2-core machine.
RAY_NODE_OPTIONS = ["--num-cpus", "1", "--object-store-memory", str(80 * 2**20), "--disable-usage-stats"]


def every_agent_spec() -> str:
    """Every registered agent on a tiny TLB; MaskablePPO also on the default TLB for 300 rounds.

    300 rounds of MaskablePPO on the default TLB are where the thread settings showed: its
    numbers differed between a local run (2 threads) and Ray (1 thread, ``OMP_NUM_THREADS=1``).
    """
    lines = [
        "rounds = 12",
        "seeds = [0]",
        "[[task]]",
        'id = "TokenizedLinearBandit-v0"',
        "kwargs = { vocab_size = 5, max_length = 3, embedding_dim = 4 }",
        'label = "tiny"',
        "[[task]]",
        'id = "TokenizedLinearBandit-v0"',
        'label = "default"',
        "rounds = 300",
        "[[task]]",
        'id = "TokenizedLinearBandit-v0"',
        'kwargs = { vocab_size = 5, max_length = 3, embedding_dim = 4, feedback = "pairwise" }',
        'label = "tiny pairwise"',
    ]
    for name in sorted(set(agents.list_agents()) - LLM_ONLY_AGENTS):
        channels = getattr(load_agent_class(name), "feedback_channels", ("scalar",))
        tasks = ["tiny"] if "scalar" in channels else ["tiny pairwise"]  # agents that learn from comparisons
        tasks += ["default"] if name == "maskable_ppo" else []
        lines += ["[[agent]]", f'name = "{name}"', f"tasks = {tasks!r}".replace("'", '"')]
    return "\n".join(lines) + "\n"


def results(store: Path) -> dict[str, list[bytes]]:
    with ResultsStore(store, create=False) as opened:
        return {
            record.spec.key: [record.arrays[name].tobytes() for name in DETERMINISTIC_ARRAYS]
            for record in opened.records()
        }


@pytest.fixture
def ray_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    # Ray workers import the package from this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION", "0.01")  # a small object store for a local Ray


def test_ray_and_local_give_the_same_bits_for_every_agent(tmp_path: Path, ray_environment: None) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(every_agent_spec())
    common = ["run", str(spec), "--no-progress", "--no-report"]
    assert main([*common, "--store", str(tmp_path / "local.sqlite"), "--workers", "1"]) == 0
    assert main([*common, "--store", str(tmp_path / "ray.sqlite"), "--backend", "ray"]) == 0
    local, remote = results(tmp_path / "local.sqlite"), results(tmp_path / "ray.sqlite")
    assert len(local) == len(set(agents.list_agents()) - LLM_ONLY_AGENTS) + 1 and local == remote
    for store in ("local.sqlite", "ray.sqlite"):
        with ResultsStore(tmp_path / store, create=False) as opened:
            for record in opened.records():
                settings = dict(record.metadata["thread_settings"])
                assert set(settings.pop("thread_pools").values()) == {1}
                assert settings == {"torch_threads": 1, **THREAD_ENVIRONMENT}
    # rerunning on Ray resumes: nothing new
    assert main([*common, "--store", str(tmp_path / "ray.sqlite"), "--backend", "ray"]) == 0
    with ResultsStore(tmp_path / "ray.sqlite", create=False) as opened:
        assert len(opened) == len(local)


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``)."""
    from tokenized_bandit_gym.evaluation.ray_backend import _descendants

    return _descendants(pid)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def long_spec(path: Path, seeds: int, rounds: int) -> Path:
    task = '[[task]]\nid = "TokenizedMultiArmedBandit-v0"\n'
    path.write_text(f'rounds = {rounds}\nseeds = {seeds}\n{task}[[agent]]\nname = "random"\n')
    return path


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_kill_9_of_tbg_run_takes_its_local_ray_down(tmp_path: Path, ray_environment: None) -> None:
    spec = long_spec(tmp_path / "spec.toml", seeds=2, rounds=200_000)
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec), "--backend", "ray"]
    command += ["--store", str(tmp_path / "r.sqlite"), "--no-progress", "--no-report"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ray_processes: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        # wait until a Ray worker plays a run (the GCS, raylet, agents and workers are all up)
        while not any("_ray_task" in command_line(pid) for pid in ray_processes):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no Ray worker started a run: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.2)
            ray_processes = descendants(process.pid)
        time.sleep(1.0)
        ray_processes = descendants(process.pid)
        agents_up = [pid for pid in ray_processes if "Agent" in command_line(pid) or "agent" in command_line(pid)]
        assert agents_up, "expected Ray's dashboard and runtime-env agents among the processes"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in ray_processes) and time.monotonic() < deadline:
            time.sleep(0.25)
        left = {pid: command_line(pid)[:100] for pid in ray_processes if alive(pid)}
        assert left == {}, f"Ray processes outlived tbg: {left}"
    finally:
        if process.poll() is None:
            process.kill()
        for pid in ray_processes:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sigterm_under_ray_says_finished_runs_are_saved_as_the_local_backend_does(
    tmp_path: Path, ray_environment: None
) -> None:
    spec = long_spec(tmp_path / "spec.toml", seeds=2, rounds=200_000)
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec), "--backend", "ray"]
    command += ["--store", str(tmp_path / "r.sqlite"), "--no-progress", "--no-report"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not any("_ray_task" in command_line(pid) for pid in descendants(process.pid)):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no Ray worker started a run: {process.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "finished runs are saved" in stderr and "Traceback" not in stderr, stderr[-2000:]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kill_cluster(markers: list[str]) -> None:
    """SIGKILL every process whose command line holds one of ``markers``, and their descendants (found first)."""
    for _ in range(5):
        roots = {
            int(entry)
            for entry in os.listdir("/proc")
            if entry.isdigit() and any(marker in command_line(int(entry)) for marker in markers)
        }
        doomed = set(roots)
        for root in roots:
            doomed |= descendants(root)
        doomed.discard(os.getpid())
        if not doomed:
            return
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)


@pytest.fixture
def two_node_cluster(ray_environment: None) -> Iterator[tuple[str, int]]:
    """A head and a worker node started by ``ray start`` (1 CPU each); yields the address and the worker raylet port."""
    head_port, worker_port = free_port(), free_port()
    temp_dir = tempfile.mkdtemp(prefix="tbgray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    ray = [sys.executable, "-m", "ray.scripts.scripts", "start", *RAY_NODE_OPTIONS]
    environment = dict(os.environ, RAY_AUTH_MODE="disabled")
    address = f"127.0.0.1:{head_port}"
    try:
        for command in (
            [*ray, "--head", "--port", str(head_port), "--temp-dir", temp_dir, "--include-dashboard", "false"],
            [*ray, "--address", address, "--node-manager-port", str(worker_port)],
        ):
            started = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=180)
            assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        yield address, worker_port
    finally:
        kill_cluster([temp_dir, f":{head_port}"])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sweep_survives_losing_a_worker_node(
    tmp_path: Path, two_node_cluster: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, worker_port = two_node_cluster
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    total = 6
    spec = long_spec(tmp_path / "spec.toml", seeds=total, rounds=6000)
    store = tmp_path / "ray.sqlite"
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", str(spec), "--backend", "ray"]
    command += ["--ray-address", address, "--store", str(store), "--no-progress", "--no-report"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        (raylet,) = [
            int(entry)
            for entry in os.listdir("/proc")
            if entry.isdigit()
            and "raylet" in command_line(int(entry))
            and f"--node_manager_port={worker_port}" in command_line(int(entry))
        ]
        deadline = time.monotonic() + 180
        while not any("_ray_task" in command_line(pid) for pid in descendants(raylet)):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the worker node never played a run")
            time.sleep(0.1)
        node = descendants(raylet) | {raylet}
        for pid in node:  # kill -9 the worker node mid-sweep: its raylet, agents and workers
            os.kill(pid, signal.SIGKILL)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-3000:]
    assert f"{total} runs stored, 0 already in the store, 0 failed" in err
    with ResultsStore(store, create=False) as opened:
        assert len(opened) == total
        assert opened._connection.execute("SELECT COUNT(*) FROM run_arrays").fetchone()[0] == total * 6
    local = tmp_path / "local.sqlite"
    assert main(["run", str(spec), "--store", str(local), "--workers", "2", "--no-progress", "--no-report"]) == 0
    assert results(local) == results(store)
