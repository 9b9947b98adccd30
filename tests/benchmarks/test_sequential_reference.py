"""The NumPy reference loops of ``benchmarks/sequential_vs_numpy.py`` play what the package plays.

Same instance (read from the env's problem), same query and noise streams, same agent seeds: the
per-round regret of ``run_online`` and of the independent NumPy loop agree to rounding, so the
benchmark compares the same work. TokenizedLinTS draws its posterior noise from torch's generator,
which the reference is handed here (in the benchmark it uses NumPy's).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import tokenized_bandit_gym  # noqa: F401
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation import run_online

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sequential_vs_numpy.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("sequential_vs_numpy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sequential_vs_numpy"] = module
    spec.loader.exec_module(module)
    return module


reference = _load_script()


@pytest.mark.parametrize(("env_id", "agent_name"), reference.CASES)
@pytest.mark.parametrize("seed", [0, 7])
def test_reference_loop_has_the_package_regret(env_id: str, agent_name: str, seed: int) -> None:
    rounds = 80
    env = gym.make(env_id)
    result = run_online(env, agents.make(agent_name), rounds, seed=seed)
    options = {}
    if agent_name == "tokenized_lin_ts":
        generator = torch.Generator()
        generator.manual_seed(seed)
        options["standard_normal"] = lambda d: torch.randn(1, d, generator=generator, dtype=torch.float64)[0].numpy()
    regret = reference.REFERENCES[agent_name](reference.reference_instance(env), rounds, seed, **options)
    np.testing.assert_allclose(result.regret, regret, rtol=0.0, atol=1e-12)
    assert np.all(regret >= -1e-12)


def test_reference_optimum_is_the_package_optimum() -> None:
    for env_id in {case[0] for case in reference.CASES}:
        env = gym.make(env_id)
        instance = reference.reference_instance(env)
        problem = env.unwrapped.problem
        queries = torch.arange(problem.num_queries)
        np.testing.assert_allclose(instance.optimum, problem.optimal(queries).utility.numpy(), rtol=0.0, atol=1e-12)


def test_benchmark_reports_every_case() -> None:
    timings = reference.main(["--rounds", "3", "--repeats", "1"])
    assert set(timings) == set(reference.CASES)
    assert all(package > 0 and numpy > 0 for package, numpy in timings.values())
