"""Smoke tests: the vector benchmark scripts run end to end with a tiny budget."""

from __future__ import annotations

import runpy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the ids)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_vector_env_throughput_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "vector_env_throughput.py"))
    for isolate in (False, True):  # in this process, and each configuration in a fresh one
        args = script["Args"](
            env_ids=("TokenizedMultiArmedBandit-v0",), num_envs=(2,), seconds=0.0, sync_seconds=0.0, isolate=isolate
        )
        script["main"](args)
        assert "| TokenizedMultiArmedBandit-v0 | 2 |" in capsys.readouterr().out
    native_only = script["Args"](env_ids=("TokenizedLinearBandit-v0",), num_envs=(3,), seconds=0.0, sync=False)
    script["main"](native_only)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| TokenizedLinearBandit-v0"))
    assert row.endswith("| - | - |")


def test_vector_env_fixed_cost_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "vector_env_fixed_cost.py"))
    for clock in ("wall", "cpu"):  # wall time, or this thread's CPU time
        script["main"](script["Args"](num_envs=(3,), seconds=0.0, repeats=1, clock=clock))
        output = capsys.readouterr().out
        assert "| 3 |" in output and f"{clock} clock" in output
    with pytest.raises(ValueError, match="--clock"):
        script["main"](script["Args"](num_envs=(3,), seconds=0.0, repeats=1, clock="sundial"))


def test_fixed_cost_minimal_steps_compute_the_same_rounds() -> None:
    """Plain, buffered and chunked (three chunks, the last ragged): the same observations and utilities, bit for bit."""
    script = runpy.run_path(str(BENCHMARKS / "vector_env_fixed_cost.py"))
    problem = gym.make("TokenizedLinearBandit-v0").unwrapped.problem
    kinds = ({}, {"buffered": True}, {"buffered": True, "chunked": True})
    steps = [script["MinimalTlbStep"](problem, 300, 0, **kind) for kind in kinds]
    rng = np.random.default_rng(1)
    for _ in range(6):
        actions = script["random_allowed"](rng, steps[0].masks)
        utilities = [step.step(actions) for step in steps]
        for step, step_utilities in zip(steps[1:], utilities[1:], strict=True):
            np.testing.assert_array_equal(step.embeddings, steps[0].embeddings)
            np.testing.assert_array_equal(step_utilities, utilities[0])
            np.testing.assert_array_equal(step.masks, steps[0].masks)


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


def test_captured_step_mode_runs(capsys: pytest.CaptureFixture[str]) -> None:
    script = runpy.run_path(str(BENCHMARKS / "captured_step_mode.py"))
    argv = ["--num-envs", "8", "--autoreset-modes", "NextStep", "--steps", "2", "--repeats", "2"]
    results = script["main"]([*argv, "--llm-rows", "2", "--max-length", "3", "--top-k", "2"])
    assert results["synthetic"][0]["captured_token_steps_per_second"] > 0 and results["llm"]["captured_seconds"] > 0
    printed = capsys.readouterr().out
    assert "| NextStep | 8 |" in printed and "captured / eager" in printed
