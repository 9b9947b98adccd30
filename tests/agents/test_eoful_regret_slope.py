"""Slow: EOFUL's cumulative regret on the default TLB grows sublinearly (Theorem 3.2: ~sqrt(T) up to logs)."""

import gymnasium as gym
import numpy as np
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the envs)
from tokenized_bandit_gym import agents
from tokenized_bandit_gym.evaluation.run_online import run_online

ROUNDS = 3000
# Linear regret has slope 1; Theorem 3.2 gives 0.5 up to log factors. The greedy gap of the
# default TLB is 0 (benchmarks/greedy_gap.py), so no constant per-round floor hides underneath.
MAX_SLOPE = 0.75


def regret_slope(cumulative_regret: np.ndarray, first: int = 100) -> float:
    """Least-squares slope of log cumulative regret against log t on a log-spaced grid of rounds."""
    rounds = np.unique(np.geomspace(first, len(cumulative_regret), 20).astype(int))
    return float(np.polyfit(np.log(rounds), np.log(cumulative_regret[rounds - 1]), 1)[0])


def test_regret_slope_detects_linear_regret():
    assert regret_slope(np.cumsum(np.full(ROUNDS, 0.1))) == pytest.approx(1.0)
    assert regret_slope(np.sqrt(np.arange(1, ROUNDS + 1))) == pytest.approx(0.5)


@pytest.mark.slow
def test_eoful_regret_is_sublinear_on_the_default_tlb():
    result = run_online(gym.make("TokenizedLinearBandit-v0"), agents.make("eoful"), ROUNDS, seed=0)
    slope = regret_slope(result.cumulative_regret)
    print(f"EOFUL log-log regret slope on TokenizedLinearBandit-v0 over {ROUNDS} rounds: {slope:.3f}")
    assert slope < MAX_SLOPE
