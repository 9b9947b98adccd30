"""The README's main job: `tbg run leaderboard` (the shipped default spec) runs and prints the table (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation.leaderboard_spec import load_spec, resolve_spec_path

REPO = Path(__file__).resolve().parents[2]
SPEC = resolve_spec_path("leaderboard")


@pytest.mark.slow
def test_default_leaderboard_runs_and_prints_the_table(tmp_path: Path) -> None:
    spec = load_spec(SPEC, check_registry=False)
    missing = sorted({agent.name for agent in spec.agents} - set(agents.list_agents()))
    if missing:
        pytest.skip(f"agents of the default suite not registered yet: {missing}")
    command = [sys.executable, "-m", "tokenized_bandit_gym.evaluation.cli", "run", "leaderboard", "--no-progress"]
    completed = subprocess.run(
        command, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=900
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    for task in spec.tasks:
        assert f"## {task.label}" in completed.stdout
    for agent in spec.agents:
        assert agent.label in completed.stdout
    assert (tmp_path / "tbg-results.sqlite").exists()
    assert (tmp_path / "tbg-report" / "leaderboard.html").exists()
