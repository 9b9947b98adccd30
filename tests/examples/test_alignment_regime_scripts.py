"""Issue 48's scripts: the reading flags of reproduce_regret.py, the paired comparison and the phase diagram."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tokenized_bandit_gym.evaluation.robust_statistics import paired_interval, quarter_rates

ROOT = Path(__file__).resolve().parents[2]


def test_paired_interval_is_student_t_over_the_per_seed_differences() -> None:
    first, second = np.array([5.0, 7.0, 6.0, 9.0]), np.array([4.0, 4.0, 5.0, 5.0])
    differences = first - second
    mean, low, high = paired_interval(first, second)
    half = stats.t.ppf(0.975, 3) * differences.std(ddof=1) / 2.0
    assert mean == differences.mean() and (low, high) == pytest.approx((mean - half, mean + half))
    shifted = paired_interval(first + 100.0, second + 100.0)  # a shared offset (the seed's queries) cancels
    assert shifted == pytest.approx((mean, low, high))
    one = paired_interval(first[:1], second[:1])
    assert one[0] == 1.0 and math.isnan(one[1]) and math.isnan(one[2])
    with pytest.raises(ValueError, match="shape"):
        paired_interval(first, second[:3])
    with pytest.raises(ValueError, match="confidence"):
        paired_interval(first, second, confidence=1.0)


def test_quarter_rates_are_regret_per_round_in_each_quarter() -> None:
    per_round = np.array([4.0] * 3 + [2.0] * 3 + [1.0] * 3 + [0.0] * 3)  # T = 12
    rates = quarter_rates(np.cumsum(per_round))
    assert rates.tolist() == [4.0, 2.0, 1.0, 0.0]
    assert quarter_rates(np.cumsum(np.ones((2, 10)), axis=1)).tolist() == [[1.0] * 4] * 2  # T = 10: 2, 3, 2, 3
    with pytest.raises(ValueError, match="4 rounds"):
        quarter_rates(np.ones(3))


def test_reading_flags_reach_the_env_and_the_default_is_v1(load_script) -> None:
    script = load_script("examples/reproduce_regret.py")
    default = script.parse_args([])
    assert default.env_id == "TokenizedAlignment-v1"
    assert {key for key in script.READING_FLAGS if getattr(default, key)} == set()  # unset: the env id's defaults
    assert "score_forced_eos" not in script.env_kwargs(default)
    args = script.parse_args(
        ["--env-id", "TokenizedAlignment-v0", "--value-map", "scaled_logprob", "--pooling", "response"]
        + ["--theta-scale", "literal", "--score-forced-eos", "no", "--embedding-norm", "l2"]
    )
    kwargs = script.env_kwargs(args)
    assert kwargs["value_map"] == "scaled_logprob" and kwargs["pooling"] == "response"
    assert kwargs["theta_scale"] == "literal" and kwargs["score_forced_eos"] is False
    assert kwargs["embedding_norm"] == "l2" and args.env_id == "TokenizedAlignment-v0"
    with pytest.raises(SystemExit, match="yes or no"):
        script.env_kwargs(script.parse_args(["--score-forced-eos", "maybe"]))


def test_regret_pairs_summarises_a_regret_json(tmp_path: Path) -> None:
    rounds = 8
    runs = {}
    for seed, offset in enumerate((0.0, 3.0, -2.0)):  # each seed's queries move both agents alike
        runs[f"eoful/{seed}"] = {"cumulative_regret": np.cumsum(np.full(rounds, 1.0 + offset)).tolist()}
        runs[f"misaligned_greedy/{seed}"] = {"cumulative_regret": np.cumsum(np.full(rounds, 2.0 + offset)).tolist()}
    settings = {"agents": "eoful,misaligned_greedy", "seeds": [0, 1, 2], "env_id": "TokenizedAlignment-v1"}
    (tmp_path / "regret.json").write_text(json.dumps({"settings": settings, "runs": runs}))
    command = [sys.executable, str(ROOT / "examples" / "regret_pairs.py"), "--regret-json", "regret.json"]
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "horizon T = 8 rounds" in result.stdout
    assert "EOFUL - Misaligned greedy: final -8.00 [-8.00, -8.00] (paired 95%)" in result.stdout


@pytest.mark.slow
def test_phase_diagram_at_tiny_scale(tmp_path: Path) -> None:
    script = str(ROOT / "examples" / "alignment_phase_diagram.py")
    options = ["--rounds", "4", "--max-length", "3", "--top-k", "3", "--ratios", "0.1", "10", "--seeds", "0,1"]
    command = [sys.executable, script, *options, "--regime-rounds", "2", "--out-dir", "out"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "out" / "phase_diagram.json").read_text())
    ratios = [point["ratio"] for point in summary["points"]]
    assert len(ratios) == 2 and ratios[0] < 1.0 < ratios[1]  # the targets are reached roughly
    for point in summary["points"]:
        assert set(point["last_quarter_rate"]) == {"eoful", "misaligned_greedy"}
        assert len(point["last_quarter_rate"]["eoful"]) == 2
        difference = point["paired_difference"]
        assert difference["low"] <= difference["mean"] <= difference["high"]
    assert (tmp_path / "out" / "phase_diagram.png").stat().st_size > 0


@pytest.mark.parametrize("name", ["eoful_radius", "alignment_phase_diagram"])
def test_scripts_built_on_reproduce_regret_take_its_presets(load_script, name: str) -> None:
    """--real-llm is the real model, the paper's theta and every core here too (it was accepted and ignored)."""
    script = load_script(f"examples/{name}.py")
    assert script.parse_args([]) == script.Args()  # no preset: the script's own defaults
    real = script.parse_args(["--real-llm"])
    assert (real.model, real.theta, real.threads) == ("smollm2-135m-instruct", 0.5, os.cpu_count())
    assert (real.rounds, real.seeds, real.agents) == (script.Args.rounds, script.Args.seeds, script.Args.agents)
    assert real.runs_per_forward == len(real.agents.split(",")) * len(real.seeds.split(","))
    assert script.parse_args(["--real-llm", "--model", "stories260K"]).model == "stories260K"


def test_the_radius_multiplier_is_never_chosen_on_a_reported_seed(load_script) -> None:
    script = load_script("examples/eoful_radius.py")
    with pytest.raises(SystemExit, match="must not be a reported seed"):
        script.main(script.Args(seeds="0,1,2", tuning_seed=1))


@pytest.mark.slow
def test_eoful_radius_at_tiny_scale(tmp_path: Path) -> None:
    script = str(ROOT / "examples" / "eoful_radius.py")
    options = ["--rounds", "4", "--max-length", "3", "--top-k", "3", "--multipliers", "0.1", "1", "--seeds", "0,1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, script, *options, "--out-dir", "out"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "out" / "eoful_radius.json").read_text())
    best = min(summary["tuning"], key=summary["tuning"].__getitem__)
    assert float(best) == summary["chosen"]  # the tuning seed's lowest final regret
    assert float(summary["chosen"]) in (0.1, 1.0) and set(summary["tuning"]) == {"0.1", "1"}
    assert all(len(finals) == 2 for finals in summary["final"].values())  # every curve on the two reported seeds
    assert set(summary["curves"]) == set(summary["final"])  # the figure is drawn from the JSON alone
    assert all(len(curve["cumulative_regret"]) == 4 for curve in summary["curves"].values())
