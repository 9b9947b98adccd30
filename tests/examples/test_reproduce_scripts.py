"""Smoke tests of the paper-reproduction scripts: a tiny run where the alignment env and agents are installed,
otherwise the clear message the scripts give when they are missing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--rounds", "3", "--max-length", "3", "--top-k", "2"]


def alignment_stack_available() -> bool:
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401

    if "TokenizedAlignment-v0" not in gym.registry:
        return False
    from tokenized_bandit_gym.agents import AGENT_ENTRY_POINTS

    return {"eoful", "fixed_theta_greedy", "misaligned_greedy"} <= set(AGENT_ENTRY_POINTS)


def run_script(name, *options, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(ROOT / "examples" / name), *options]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=cwd)


@pytest.mark.parametrize("script, output", [("reproduce_regret.py", "regret"), ("reproduce_ratio.py", "ratio")])
def test_reproduction_script(script, output, tmp_path):
    result = run_script(script, *TINY, "--out-dir", str(tmp_path), cwd=tmp_path)
    if not alignment_stack_available():
        assert result.returncode == 2
        assert "TokenizedAlignment-v0" in result.stderr and "Traceback" not in result.stderr
        return
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / f"{output}.json").read_text())
    assert (tmp_path / f"{output}.png").stat().st_size > 0
    if output == "regret":
        assert set(data["agents"]) == {"eoful", "fixed_theta_greedy", "misaligned_greedy"}
        assert all(len(entry["cumulative_regret"]) == 3 for entry in data["agents"].values())
    else:
        for norm in ("sigma", "sigma_inverse"):
            assert len(data[norm]["ratio_max"]) == len(data[norm]["ratio_mean"]) == 3
            assert data[norm]["max_of_max"] >= 1.0 - 1e-9  # the whole response is one of its prefixes
    assert "expected run time" in result.stdout


def test_bound_and_slope_helpers(load_script):
    module = load_script("examples/reproduce_regret.py")
    import numpy as np

    t = np.arange(1, 1001)
    bound = module.theoretical_bound(t, length=30, dim=4, c=1.0)
    assert bound[-1] == pytest.approx(30 * np.sqrt(4 * 1000 * np.log(1000)))
    assert module.loglog_slope(np.sqrt(t) * 3.0) == pytest.approx(0.5, abs=1e-9)
    assert module.loglog_slope(t * 0.2) == pytest.approx(1.0, abs=1e-9)
    args = module.parse_args(["--paper", "--top-k", "10"])
    assert (args.rounds, args.max_length, args.top_k, args.gamma, args.theta) == (10_000, 30, 10, 0.8, 0.5)
    assert module.parse_args([]).theta == 0.0  # the env's unit-norm 0.5 * 1


def test_wrong_theta_is_minus_theta_by_default(load_script):
    import gymnasium as gym
    import torch

    import tokenized_bandit_gym  # noqa: F401

    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 is not installed")
    module = load_script("examples/reproduce_regret.py")
    problem = gym.make("TokenizedAlignment-v0", max_length=3, top_k=2).unwrapped.problem
    wrong = module.wrong_theta(problem)  # (d + 1,) [(1 - gamma) theta' : gamma]
    torch.testing.assert_close(wrong[:-1], -(1.0 - problem.gamma) * problem.latent_theta)
    assert float(wrong[-1]) == pytest.approx(problem.gamma)
    # theta' = -theta in the features too, but for the v(p) weight gamma, which both keep
    torch.testing.assert_close(wrong[:-1], -problem.theta[:-1])
    constant = module.wrong_theta(problem, -0.5)
    torch.testing.assert_close(constant[:-1], torch.full_like(constant[:-1], -0.5 * (1.0 - problem.gamma)))


@pytest.mark.slow
def test_reproduce_ratio_rerun_resumes_instead_of_repeating(tmp_path):
    """A second call with the same settings and --out-dir plots the finished run again without running EOFUL."""
    if not alignment_stack_available():
        pytest.skip("TokenizedAlignment-v0 and EOFUL are not installed")
    first = run_script("reproduce_ratio.py", *TINY, "--out-dir", "out", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary = json.loads((tmp_path / "out" / "ratio.json").read_text())
    second = run_script("reproduce_ratio.py", *TINY, "--out-dir", "out", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "resuming" in second.stdout and "expected run time" not in second.stdout
    assert json.loads((tmp_path / "out" / "ratio.json").read_text()) == summary
    other = run_script("reproduce_ratio.py", *TINY, "--seed", "1", "--out-dir", "out", cwd=tmp_path)
    assert other.returncode == 0 and "resuming" not in other.stdout  # other settings: a new run
