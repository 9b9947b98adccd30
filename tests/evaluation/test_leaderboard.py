"""Grouping runs into the leaderboard: means, ranks, normalisation and P(improvement) by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tests.evaluation.records import make_record
from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard


def constant_regret(final: float, rounds: int = 10) -> np.ndarray:
    return np.full(rounds, final / rounds)


def records() -> list:
    finals = {
        ("A", "random"): [10.0, 12.0, 14.0],
        ("A", "good"): [1.0, 2.0, 3.0],
        ("B", "random"): [100.0, 100.0],
        ("B", "good"): [50.0, 30.0],
    }
    return [
        make_record(task, agent, seed, constant_regret(value), ms=2.0 if agent == "good" else 1.0)
        for (task, agent), values in finals.items()
        for seed, value in enumerate(values)
    ]


def test_rows_hold_per_task_statistics() -> None:
    board = build_leaderboard(records())
    assert board.tasks == ["A", "B"]
    rows = {(row.task, row.agent): row for row in board.rows}
    assert rows[("A", "good")].mean == pytest.approx(2.0)
    assert rows[("A", "good")].iqm == pytest.approx(2.0)
    assert rows[("A", "random")].mean == pytest.approx(12.0)
    assert rows[("B", "good")].mean == pytest.approx(40.0)
    assert rows[("A", "good")].ms_per_round == pytest.approx(2.0)
    assert rows[("A", "good")].rank == 1 and rows[("A", "random")].rank == 2
    assert rows[("A", "good")].ci_low <= 2.0 <= rows[("A", "good")].ci_high
    # constant per-round regret: R(t) is linear in t
    assert rows[("A", "good")].growth_exponent == pytest.approx(1.0)
    assert rows[("A", "good")].normalized_mean == pytest.approx(2.0 / 12.0)
    assert [row.agent for row in board.rows_for("A")] == ["good", "random"]


def test_aggregate_normalises_by_random_and_ranks_by_iqm() -> None:
    board = build_leaderboard(records())
    assert board.references == {"A": "random", "B": "random"}
    good = next(row for row in board.aggregate if row.agent == "good")
    pooled = [1 / 12, 2 / 12, 3 / 12, 50 / 100, 30 / 100]
    assert good.mean == pytest.approx(np.mean(pooled))
    assert good.tasks == 2 and good.runs == 5 and good.rank == 1
    assert good.mean_ci_low <= good.mean <= good.mean_ci_high
    assert board.agents == ["good", "random"]


def test_probability_of_improvement_averages_tasks() -> None:
    board = build_leaderboard(records())
    # every good run beats every random run on both tasks
    assert board.improvement[("good", "random")] == pytest.approx(1.0)
    assert board.improvement[("random", "good")] == pytest.approx(0.0)


def test_curves_are_mean_cumulative_regret_with_band() -> None:
    board = build_leaderboard(records())
    curve = board.curves["A"]["good"]
    assert curve.rounds[0] == 1 and curve.rounds[-1] == 10
    np.testing.assert_allclose(curve.mean[-1], 2.0)
    assert np.all(curve.low <= curve.mean + 1e-12) and np.all(curve.mean <= curve.high + 1e-12)


def test_same_label_with_other_rounds_is_kept_apart() -> None:
    board = build_leaderboard([make_record("A", "random", 0, [1.0, 1.0]), make_record("A", "random", 0, [1.0] * 3)])
    assert board.tasks == ["A", "A [T=3]"]
