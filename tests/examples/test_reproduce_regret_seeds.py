"""reproduce_regret.py over several seeds: their mean and band, and a rerun that resumes instead of repeating."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.examples.test_reproduce_scripts import alignment_stack_available

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--rounds", "3", "--max-length", "3", "--top-k", "2", "--seeds", "0,1"]


def run(out_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    script = str(ROOT / "examples" / "reproduce_regret.py")
    command = [sys.executable, script, *TINY, "--out-dir", str(out_dir)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=out_dir)


def test_seeds_are_averaged_and_a_rerun_resumes(tmp_path: Path) -> None:
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and the reproduction agents are not installed")
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    data = json.loads((tmp_path / "regret.json").read_text())
    assert sorted(data["runs"]) == sorted(f"{name}/{seed}" for name in data["agents"] for seed in (0, 1))
    for name, entry in data["agents"].items():
        per_seed = np.array([data["runs"][f"{name}/{seed}"]["cumulative_regret"] for seed in (0, 1)])
        np.testing.assert_allclose(entry["cumulative_regret"], per_seed.mean(axis=0))
        np.testing.assert_allclose(entry["cumulative_regret_min"], per_seed.min(axis=0))
    assert "queries: " in first.stdout
    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "resuming: 6 finished runs kept" in second.stdout and "expected run time" not in second.stdout
    assert json.loads((tmp_path / "regret.json").read_text())["runs"] == data["runs"]
