"""Smoke tests: the vector benchmark scripts run end to end with a tiny budget."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_vector_env_throughput_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "vector_env_throughput.py"))
    for isolate in (False, True):  # in this process, and each configuration in a fresh one
        args = script["Args"](
            env_ids=("TokenizedMultiArmedBandit-v0",), num_envs=(2,), seconds=0.0, sync_seconds=0.0, isolate=isolate
        )
        script["main"](args)
        assert "| TokenizedMultiArmedBandit-v0 | 2 |" in capsys.readouterr().out


def test_vector_env_fixed_cost_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "vector_env_fixed_cost.py"))
    script["main"](script["Args"](num_envs=(3,), seconds=0.0, repeats=1))
    assert "| 3 |" in capsys.readouterr().out


def test_batched_eoful_regret_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "batched_eoful_regret.py"))
    script["main"](script["Args"](rounds=8, num_envs=(1, 4), seeds=(0,)))
    output = capsys.readouterr().out
    assert "| 1 |" in output and "| 4 |" in output


def test_batched_greedy_etc_regret_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "batched_greedy_etc_regret.py"))
    rows = script["main"](script["Args"](rounds=40, exploration_rounds=1, num_envs=(1, 4), seeds=(0,)))
    assert [num_envs for num_envs, _ in rows] == [1, 4]
    assert "| 4 |" in capsys.readouterr().out


def test_llm_vector_env_throughput_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "llm_vector_env_throughput.py"))
    args = script["Args"](env_ids=("TokenizedDecoding-v0",), num_envs=(2,), max_length=3, seconds=0.0, repeats=1)
    rows = script["main"](args)
    assert rows[0][0] == "TokenizedDecoding-v0" and all(rate > 0 for rate in rows[0][2].values())
    assert "| TokenizedDecoding-v0 | 2 |" in capsys.readouterr().out
