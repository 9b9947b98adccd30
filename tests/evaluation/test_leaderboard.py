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
    # random is a reference row: shown, not ranked
    assert rows[("A", "good")].rank == 1 and rows[("A", "random")].rank == 0 and rows[("A", "random")].reference
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


def swept_spec(reference_random: bool | None = None):
    from tokenized_bandit_gym.evaluation.leaderboard_spec import parse_spec

    agents = [{"name": "good", "theory_exponent": 0.7}, {"name": "random"}]
    if reference_random is not None:
        agents[1]["reference"] = reference_random
    return parse_spec(
        {
            "rounds": 16,
            "seeds": [0, 1],
            "task": [
                {"id": "A-v0", "label": "A", "horizons": [4, 8], "caveat": "mind the gap", "theorem_applies": True}
            ],
            "agent": agents,
        },
        check_registry=False,
    )


def swept_records(exponent: float = 0.7) -> list:
    """Every run of swept_spec(): good's final regret is T^exponent, random's is T (linear)."""
    return [
        make_record(
            "A",
            run.agent,
            run.seed,
            constant_regret(run.rounds**exponent if run.agent == "good" else run.rounds, run.rounds),
        )
        for run in swept_spec().runs()
    ]


def test_spec_horizons_run_every_agent_at_every_horizon() -> None:
    runs = swept_spec().runs()
    assert sorted({run.rounds for run in runs}) == [4, 8, 16]
    assert len(runs) == 2 * 3 * 2  # agents x horizons x seeds


def test_horizon_runs_give_the_horizon_exponent_not_tables_of_their_own() -> None:
    board = build_leaderboard(swept_records(0.7), spec=swept_spec())
    assert board.tasks == ["A"]
    rows = {row.agent: row for row in board.rows}
    assert rows["good"].rounds == 16 and rows["good"].runs == 2
    assert rows["good"].horizon_exponent == pytest.approx(0.7)
    assert rows["random"].horizon_exponent == pytest.approx(1.0)
    assert rows["good"].theory_exponent == pytest.approx(0.7)
    np.testing.assert_array_equal(board.horizon_points["A"]["good"].horizons, [4, 8, 16])
    assert board.caveats == {"A": "mind the gap"}
    # without the spec the extra horizons are tasks of their own
    assert len(build_leaderboard(swept_records()).tasks) == 3


def test_reference_rows_are_not_ranked_and_the_spec_can_say_otherwise() -> None:
    board = build_leaderboard(swept_records(), spec=swept_spec())
    assert {row.agent: row.rank for row in board.rows} == {"good": 1, "random": 0}
    assert board.reference_agents == {"random"}
    board = build_leaderboard(swept_records(), spec=swept_spec(reference_random=False))
    assert {row.agent: row.rank for row in board.rows} == {"good": 1, "random": 2}
    assert not board.reference_agents


def test_provenance_lists_every_distinct_value() -> None:
    first, second = records()[:2]
    first.metadata.update(git_commit="abc", torch_version="2.13.0")
    second.metadata.update(git_commit="def", torch_version="2.13.0")
    board = build_leaderboard([first, second])
    assert board.provenance["git_commit"] == ["abc", "def"]
    assert board.provenance["torch_version"] == ["2.13.0"]


def test_report_json_is_strict_json_with_horizons_and_provenance(tmp_path) -> None:
    import json

    from tokenized_bandit_gym.evaluation.leaderboard_report import markdown_report, write_report

    one_seed = [record for record in swept_records() if record.spec.seed == 0]  # CIs of one seed are NaN
    board = build_leaderboard(one_seed, spec=swept_spec(), resamples=50)
    paths = write_report(board, tmp_path)

    def reject(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    document = json.loads(paths["json"].read_text(encoding="utf-8"), parse_constant=reject)
    assert document["horizons"]["A"]["good"]["horizons"] == [4, 8, 16]
    assert document["reference_agents"] == ["random"] and document["horizon_runs"] == 4
    assert "6 runs (4 of them at extra horizons)" in markdown_report(board)
    assert (tmp_path / "horizons_A.png").stat().st_size > 0
