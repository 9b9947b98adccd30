"""The Ray backend on a local Ray gives the same results as the local backend (slow; needs ray)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokenized_bandit_gym.evaluation.cli import main
from tokenized_bandit_gym.evaluation.results_store import ResultsStore
from tokenized_bandit_gym.evaluation.run_record import DETERMINISTIC_ARRAYS

REPO = Path(__file__).resolve().parents[2]

SPEC = """
rounds = 25
seeds = [0, 1]

[[task]]
id = "TokenizedLinearBandit-v0"
kwargs = { vocab_size = 5, max_length = 3, embedding_dim = 4 }

[[task]]
id = "TokenizedMultiArmedBandit-v0"

[[agent]]
name = "random"

[[agent]]
name = "oracle_greedy"
"""


def results(store: Path) -> dict[str, list[bytes]]:
    with ResultsStore(store, create=False) as opened:
        return {
            record.spec.key: [record.arrays[name].tobytes() for name in DETERMINISTIC_ARRAYS]
            for record in opened.records()
        }


@pytest.mark.slow
def test_ray_backend_matches_local_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    # Ray workers import the package from this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    common = ["run", str(spec), "--no-progress", "--no-report"]
    assert main([*common, "--store", str(tmp_path / "local.sqlite"), "--workers", "1"]) == 0
    assert main([*common, "--store", str(tmp_path / "ray.sqlite"), "--backend", "ray"]) == 0
    local, remote = results(tmp_path / "local.sqlite"), results(tmp_path / "ray.sqlite")
    assert len(local) == 8 and local == remote
    # rerunning on Ray resumes: nothing new
    assert main([*common, "--store", str(tmp_path / "ray.sqlite"), "--backend", "ray"]) == 0
    with ResultsStore(tmp_path / "ray.sqlite", create=False) as opened:
        assert len(opened) == 8
