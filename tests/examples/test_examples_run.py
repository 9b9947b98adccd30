"""Smoke tests: every example script runs with a tiny budget."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tokenized_bandit_gym import agents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"example_{name}"] = module
    spec.loader.exec_module(module)
    return module


def test_quickstart_runs_and_oracle_beats_random() -> None:
    module = load("quickstart")
    totals = module.main(module.Args(rounds=30))
    assert totals["oracle_greedy"] < totals["random"]


def test_eoful_vs_greedy_etc_runs(tmp_path: Path) -> None:
    module = load("eoful_vs_greedy_etc")
    out = tmp_path / "regret.png"
    finals = module.main(module.parse_args(["--rounds", "15", "--seeds", "1", "--out", str(out)]))
    assert out.stat().st_size > 0
    for names in finals.values():
        assert "random" in names
        for name in names:
            assert name in agents.list_agents()
