"""Smoke test: the SB3-vs-EOFUL example runs with a tiny budget and writes its plot."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sb3_vs_eoful.py"


def load_example():
    spec = importlib.util.spec_from_file_location("sb3_vs_eoful", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_example_runs_and_skips_unregistered_agents(tmp_path, capsys):
    example = load_example()
    plot = tmp_path / "regret.png"
    args = example.parse_args(
        [
            "--rounds",
            "6",
            "--tlb-agents",
            "ppo,maskable_ppo,dqn,no_such_agent,random",
            "--tmab-agents",
            "maskable_ppo,oracle_greedy",
            "--plot",
            str(plot),
        ]
    )
    results = example.main(args)
    assert "skipping agent 'no_such_agent'" in capsys.readouterr().out
    assert sorted(results["TokenizedLinearBandit-v0"]) == ["dqn", "maskable_ppo", "ppo", "random"]
    assert all(result.rounds == 6 for by_agent in results.values() for result in by_agent.values())
    assert plot.stat().st_size > 0


def test_example_arena_mode(tmp_path):
    example = load_example()
    args = example.parse_args(
        ["--rounds", "4", "--arena", "--tlb-agents", "ppo,random", "--tmab-agents", "", "--plot", ""]
    )
    results = example.main(args)
    assert list(results) == ["TokenizedLinearBandit-v0"]
