"""Smoke tests: every example script runs with a tiny budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tokenized_bandit_gym import agents


def test_quickstart_runs_and_oracle_beats_random(load_script: Callable[[str], ModuleType]) -> None:
    module = load_script("examples/quickstart.py")
    totals = module.main(module.Args(rounds=30))
    assert totals["oracle_greedy"] < totals["random"]


def test_eoful_vs_greedy_etc_runs(load_script: Callable[[str], ModuleType], tmp_path: Path) -> None:
    module = load_script("examples/eoful_vs_greedy_etc.py")
    out = tmp_path / "regret.png"
    finals = module.main(module.parse_args(["--rounds", "15", "--seeds", "1", "--out", str(out)]))
    assert out.stat().st_size > 0
    for names in finals.values():
        assert "random" in names
        for name in names:
            assert name in agents.list_agents()
