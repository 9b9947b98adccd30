"""The report's claims block: each claim of the paper the runs test, its measured value, 95% interval and verdict."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from tests.evaluation.records import make_record
from tokenized_bandit_gym.evaluation.leaderboard import build_leaderboard
from tokenized_bandit_gym.evaluation.leaderboard_claims import (
    CONSISTENT,
    EXPONENT_TOLERANCE,
    NOT_CONSISTENT,
    NOT_SETTLED,
    bound_slope,
    exponent_text,
)
from tokenized_bandit_gym.evaluation.leaderboard_report import (
    CLAIMS_TITLE,
    markdown_report,
    plotted_leaderboard,
    write_report,
)
from tokenized_bandit_gym.evaluation.leaderboard_spec import parse_spec
from tokenized_bandit_gym.evaluation.regret_plots import agent_colours, close_figure, plot_all, plot_task
from tokenized_bandit_gym.evaluation.robust_statistics import (
    growth_exponent,
    growth_exponent_interval,
    horizon_exponent_interval,
    loglog_slopes,
)

SEEDS = (0, 1, 2)
ROUNDS = 400


def runs(task: str, agent: str, per_round: np.ndarray, spread: float = 0.05) -> list:
    """Three seeds of ``agent`` on ``task`` whose per-round regret is ``per_round * (1 + spread * (seed - 1))``."""
    return [make_record(task, agent, seed, per_round * (1.0 + spread * (seed - 1))) for seed in SEEDS]


def spec(theorem_tasks: tuple[str, ...], tasks: tuple[str, ...]) -> object:
    return parse_spec(
        {
            "rounds": ROUNDS,
            "seeds": list(SEEDS),
            "task": [
                {"id": f"{label}-v0", "label": label, "theorem_applies": label in theorem_tasks} for label in tasks
            ],
            "agent": [
                {"name": name} for name in ("eoful", "greedy_etc", "fixed_theta_greedy", "misaligned_greedy", "random")
            ],
        },
        check_registry=False,
    )


def sqrt_regret() -> np.ndarray:
    t = np.arange(1, ROUNDS + 1)
    return 0.5 / np.sqrt(t)  # R(t) ~ sqrt(t): growth exponent 0.5


def test_a_sqrt_t_learner_is_consistent_with_theorem_3_2_and_a_linear_one_is_not() -> None:
    records = runs("A", "eoful", sqrt_regret()) + runs("B", "eoful", np.full(ROUNDS, 0.3))
    records += runs("A", "random", np.full(ROUNDS, 1.0)) + runs("B", "random", np.full(ROUNDS, 1.0))
    board = build_leaderboard(records, resamples=200, spec=spec(("A", "B"), ("A", "B")))
    claims = {claim.task: claim for claim in board.claims}
    assert set(claims) == {"A", "B"}  # random has no theory exponent: no claim for it
    assert claims["A"].source == "Theorem 3.2" and "sqrt(T) up to logs" in claims["A"].statement
    assert claims["A"].measured == pytest.approx(0.5, abs=0.05)  # sum of 1/sqrt(t): slope near 0.5
    # the interval fits 200 points of the window, the table's exponent all of them: equal to rounding
    assert claims["A"].ci_low - 1e-3 <= claims["A"].measured <= claims["A"].ci_high + 1e-3
    assert claims["A"].verdict == CONSISTENT
    assert claims["B"].measured == pytest.approx(1.0, abs=0.01)
    assert claims["B"].ci_low > bound_slope(np.arange(200.0, 401.0), 0.5) + EXPONENT_TOLERANCE
    assert claims["B"].verdict == NOT_CONSISTENT


def test_the_alignment_comparison_reads_each_way_and_orders_the_tasks() -> None:
    ones = np.ones(20)
    records = []
    for task, learner, baseline in (("low", 0.1, 0.5), ("high", 0.5, 0.1), ("tie", 0.3, 0.3)):
        records += runs(task, "eoful", learner * ones, spread=0.2)
        records += runs(task, "fixed_theta_greedy", baseline * ones, spread=0.2)
        records += runs(task, "misaligned_greedy", baseline * ones, spread=0.2)
    records = runs("plain", "random", ones) + records  # a task with no claim, stored first
    board = build_leaderboard(records, resamples=200)
    verdicts = {claim.task: claim.verdict for claim in board.claims}
    assert verdicts == {"low": CONSISTENT, "high": NOT_CONSISTENT, "tie": NOT_SETTLED}
    assert board.tasks == ["low", "high", "tie", "plain"]  # the claims' tasks first, in the claims' order
    low = next(claim for claim in board.claims if claim.task == "low")
    assert low.agents == ("eoful", "fixed_theta_greedy", "misaligned_greedy")
    assert low.ci_high < 0 and "Section 6.2" in low.source


def test_every_output_carries_the_claims_block(tmp_path: Path) -> None:
    records = runs("A", "eoful", sqrt_regret()) + runs("A", "random", np.full(ROUNDS, 1.0))
    board = build_leaderboard(records, resamples=200, spec=spec(("A",), ("A",)))
    text = markdown_report(board)
    claims_at = text.index(f"## {CLAIMS_TITLE}")
    assert claims_at < text.index("Leader:") < text.index("## A")
    assert "| Theorem 3.2: eoful's regret grows like sqrt(T) up to logs | A |" in text
    paths = write_report(board, tmp_path)
    with paths["claims.csv"].open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["verdict"] for row in rows] == [CONSISTENT] and rows[0]["task"] == "A"
    document = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert document["claims"][0]["measured_text"] == board.claims[0].measured_text
    body = paths["html"].read_text(encoding="utf-8")
    assert body.index('id="claims"') < body.index('class="headline"') < body.index("<h2>A</h2>")


def test_plots_scale_to_the_compared_agents_and_read_back_from_json(tmp_path: Path) -> None:
    records = runs("A", "eoful", sqrt_regret()) + runs("A", "other", 2 * sqrt_regret())
    records += runs("A", "random", np.full(ROUNDS, 1.0))
    board = build_leaderboard(records, resamples=200)
    colours = agent_colours(board)
    assert len(set(colours.values())) == len(board.agents)
    figure = plot_task(board, "A")
    top = figure.axes[0].get_ylim()[1]
    compared = max(float(board.curves["A"][agent].high.max()) for agent in ("eoful", "other"))
    assert compared <= top < float(board.curves["A"]["random"].mean[-1])  # random runs off the top
    assert any("off scale" in text.get_text() for text in figure.axes[0].get_legend().get_texts())
    close_figure(figure)
    document = json.loads(write_report(board, tmp_path)["json"].read_text(encoding="utf-8"))
    again = plotted_leaderboard(document)
    assert again.tasks == board.tasks and again.reference_agents == board.reference_agents
    np.testing.assert_allclose(again.curves["A"]["eoful"].mean, board.curves["A"]["eoful"].mean)
    close_figure(plot_all(again))


def test_exponent_intervals_cover_the_true_exponent() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(1, 1001)
    curves = np.stack([t**exponent for exponent in (0.55, 0.58, 0.6, 0.62, 0.65)])  # (5, T): seeds differ in rate
    low, high = growth_exponent_interval(curves, resamples=300)
    assert 0.55 < low < growth_exponent(curves.mean(axis=0)) < high < 0.65
    horizons = np.array([1000.0, 2000.0, 4000.0, 8000.0])
    finals = [h ** (2 / 3) * (1.0 + 0.1 * rng.standard_normal(4)) for h in horizons]
    low, high = horizon_exponent_interval(horizons, finals, resamples=300)
    point = float(loglog_slopes(horizons, np.array([values.mean() for values in finals])))
    assert low < point < high and abs(point - 2 / 3) < 0.1 and high - low < 0.3
    assert np.isnan(horizon_exponent_interval(horizons, [np.ones(1)] * 4)[0])  # one seed: no interval
    with pytest.raises(ValueError, match="one array of final regrets per horizon"):
        horizon_exponent_interval(horizons, finals[:2])


def test_loglog_slopes_leave_out_non_positive_points_and_fit_rows() -> None:
    x = np.array([1.0, 2.0, 4.0, 8.0])
    rows = np.stack([x**0.5, np.array([-1.0, 2.0, 4.0, 8.0]), np.array([-1.0, -1.0, -1.0, 3.0])])  # (3, 4)
    slopes = loglog_slopes(x, rows)
    assert slopes[0] == pytest.approx(0.5) and slopes[1] == pytest.approx(1.0) and np.isnan(slopes[2])
    assert exponent_text(0.5) == "sqrt(T)" and exponent_text(2 / 3) == "T^(2/3)" and exponent_text(0.42) == "T^(0.42)"
