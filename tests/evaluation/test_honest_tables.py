"""The leaderboard's tables claim no more than the runs show: benchmarks, ranks, theory, intervals, headline."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from tests.evaluation.records import make_record
from tokenized_bandit_gym.evaluation.leaderboard import BENCHMARKS, build_leaderboard
from tokenized_bandit_gym.evaluation.leaderboard_report import CLAIMS_TITLE, markdown_report, write_report
from tokenized_bandit_gym.evaluation.leaderboard_spec import parse_spec

SEEDS = (0, 1, 2)


def runs(task: str, agent: str, per_round: float, benchmark: str = "exact", spread: float = 0.1) -> list:
    """Three seeds of ``agent`` on ``task`` with regret ``per_round * (1 + spread * seed)`` each round."""
    records = []
    for seed in SEEDS:
        record = make_record(task, agent, seed, np.full(10, per_round * (1.0 + spread * seed)))
        record.metadata["benchmark"] = benchmark
        records.append(record)
    return records


def section(text: str, title: str) -> str:
    """The Markdown section under the heading ``## title``."""
    return text.split(f"\n## {title}")[1].split("\n## ")[0]


def spec(theorem_tasks: tuple[str, ...] = ()) -> object:
    return parse_spec(
        {
            "rounds": 10,
            "seeds": list(SEEDS),
            "task": [
                {"id": f"{label}-v0", "label": label, "theorem_applies": label in theorem_tasks} for label in "ABC"
            ],
            "agent": [{"name": "eoful"}, {"name": "greedy_etc"}, {"name": "other"}, {"name": "random"}],
        },
        check_registry=False,
    )


def test_each_task_states_its_benchmark_and_llm_benchmarks_are_not_upper_bounds() -> None:
    records = runs("A", "eoful", 0.1) + runs("B", "eoful", -0.2, benchmark="oracle_greedy")
    board = build_leaderboard(records, resamples=50)
    assert board.benchmarks == {"A": "exact", "B": "oracle_greedy"}
    text = markdown_report(board)
    assert f"Benchmark: {BENCHMARKS['exact']}." in text
    assert f"Benchmark: {BENCHMARKS['oracle_greedy']}." in text and "not an upper bound" in text
    assert "against the exact optimum" not in text


def test_agents_that_played_different_tasks_are_not_ranked_across_tasks() -> None:
    records = runs("A", "eoful", 0.1) + runs("A", "other", 0.3) + runs("B", "greedy_etc", 0.2)
    records += runs("A", "random", 1.0) + runs("B", "random", 1.0)
    board = build_leaderboard(records, resamples=50)
    ranks = {row.agent: row.rank for row in board.aggregate}
    assert ranks == {"eoful": None, "other": None, "greedy_etc": None, "random": 0}
    assert "did not all play the same tasks" in board.aggregate_note
    # within a task, agents are still ranked
    assert {row.agent: row.rank for row in board.rows_for("A")} == {"eoful": 1, "other": 2, "random": 0}
    # agents with one common task set are ranked across tasks
    same = build_leaderboard(runs("A", "eoful", 0.1) + runs("A", "other", 0.3) + runs("A", "random", 1.0))
    assert {row.agent: row.rank for row in same.aggregate} == {"eoful": 1, "other": 2, "random": 0}


def test_no_rank_where_the_score_is_na_and_a_zero_normaliser_is_said() -> None:
    # No random on the task: the worst agent normalises, and its mean regret is 0.
    records = runs("A", "eoful", 0.0) + runs("A", "other", 0.0)
    board = build_leaderboard(records, resamples=50)
    assert all(np.isnan(row.iqm) and row.rank is None for row in board.aggregate)
    assert "<= 0" in board.aggregate_note
    table = section(markdown_report(board), "All tasks")
    assert "| 1 |" not in table and "| - | eoful |" in table


def test_theory_only_where_the_theorem_applies(tmp_path: Path) -> None:
    records = runs("A", "eoful", 0.1) + runs("B", "eoful", 0.1) + runs("C", "eoful", 0.1)
    board = build_leaderboard(records, resamples=50, spec=spec(theorem_tasks=("A",)))
    exponents = {row.task: row.theory_exponent for row in board.rows}
    assert exponents["A"] == pytest.approx(0.5) and np.isnan(exponents["B"]) and np.isnan(exponents["C"])
    assert board.theory_exponent("A", "eoful") == pytest.approx(0.5) and board.theory_exponent("B", "eoful") is None
    text = markdown_report(board)
    table_a, table_b = section(text, "A\n"), section(text, "B\n")
    assert "| theory |" in table_a and "| theory |" not in table_b
    html = write_report(board, tmp_path)["html"].read_text(encoding="utf-8")
    assert html.count("theory t^0.5") == 2  # the dashed curve of A in its own plot and in the overview only


def test_a_zero_width_interval_says_all_seeds_were_identical(tmp_path: Path) -> None:
    board = build_leaderboard(runs("A", "greedy_etc", 0.5, spread=0.0) + runs("A", "eoful", 0.1), resamples=50)
    rows = {row.agent: row for row in board.rows}
    assert rows["greedy_etc"].seeds_identical and rows["greedy_etc"].ci_low == rows["greedy_etc"].ci_high
    assert not rows["eoful"].seeds_identical
    assert "[5.00, 5.00] (all 3 seeds identical)" in markdown_report(board)
    with (write_report(board, tmp_path)["summary.csv"]).open(encoding="utf-8") as handle:
        identical = {row["agent"]: row["seeds_identical"] for row in csv.DictReader(handle)}
    assert identical == {"eoful": "False", "greedy_etc": "True"}


def test_without_a_spec_the_report_says_what_it_cannot_show() -> None:
    board = build_leaderboard(runs("A", "eoful", 0.1), resamples=50)
    assert "No leaderboard spec was given" in markdown_report(board)
    with_spec = build_leaderboard(runs("A", "eoful", 0.1), resamples=50, spec=spec())
    assert "No leaderboard spec was given" not in markdown_report(with_spec)


def test_the_page_opens_with_a_three_line_headline(tmp_path: Path) -> None:
    records = runs("A", "eoful", 0.1) + runs("A", "other", 0.3) + runs("A", "random", 1.0)
    board = build_leaderboard(records, resamples=50)
    assert len(board.headline) == 3
    leader, margin, confidence = board.headline
    assert leader == "Leader: A: eoful."
    assert "1.10 for eoful against 3.30 for other" in margin and "2.20 lower" in margin
    assert "P(eoful < other) = 1.00" in confidence and "do not overlap" in confidence
    paths = write_report(board, tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    body = html[html.index("<body>") :]
    # The claims block opens the page; the headline follows it, before the definitions and any table.
    assert body.index('id="claims"') < body.index('class="headline"') < body.index('class="note"')
    lines = markdown_report(board).splitlines()
    assert lines[2] == f"## {CLAIMS_TITLE}" and "These runs test none of the paper's claims" in lines[4]
    assert lines[6] == leader + "  " and all(not line.startswith("| ") for line in lines[:6])
    document = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert document["headline"] == board.headline and document["benchmarks"] == {"A": "exact"}
