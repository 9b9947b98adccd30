"""The Ray backend gives the same bits as the local backend for every agent, also under faults (needs ray).

The parity test runs by default (CI installs the ``distributed`` extra); the fault tests start a
real Ray (a local one killed with the driver, or a two-node cluster losing its worker node) and
are ``slow``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import agents
from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.execute_run import THREAD_ENVIRONMENT
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.evaluation.run_record import DETERMINISTIC_ARRAYS

REPO = Path(__file__).resolve().parents[2]
# Agents that need an LLM env (log-probs) and cannot play the synthetic tasks.
LLM_ONLY_AGENTS = {"misaligned_greedy"}
# Small object store and no dashboard: Ray is heavy on a 2-core machine.
RAY_NODE_OPTIONS = ["--num-cpus", "1", "--object-store-memory", str(80 * 2**20), "--include-dashboard", "false"]


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
    ]
    for name in sorted(set(agents.list_agents()) - LLM_ONLY_AGENTS):
        tasks = '["tiny", "default"]' if name == "maskable_ppo" else '["tiny"]'
        lines += ["[[agent]]", f'name = "{name}"', f"tasks = {tasks}"]
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
    monkeypatch.setenv("RAY_object_store_memory", str(80 * 2**20))


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
