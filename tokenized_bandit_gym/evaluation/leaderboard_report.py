"""Leaderboard outputs: a Markdown table, a self-contained HTML page, plots, CSV and JSON.

``write_report(leaderboard, out_dir)`` writes::

    leaderboard.md      the Markdown tables (also what ``tbg run`` prints)
    leaderboard.html    one self-contained page: tables and inline SVG plots, no external files
    regret_curves.png   every task's curves (also .svg), and regret_<task>.png/.svg per task
    summary.csv         one row per agent and task; aggregate.csv one row per agent
    runs.csv            one row per run with its metadata
    leaderboard.json    all of the above as data
"""

from __future__ import annotations

import csv
import html
import json
import math
import re
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tokenized_bandit_gym.evaluation.leaderboard import GROWTH_WINDOW_START, Leaderboard
from tokenized_bandit_gym.evaluation.regret_plots import close_figure, plot_all, plot_task

_EXPLANATION = (
    "Regret is the final cumulative regret R(T) = sum_t [u(x_t, y*_t) - u(x_t, y_t)] against the exact optimum "
    "(lower is better). Mean and IQM (interquartile mean) are over seeds; the 95% CI of the mean is a "
    "percentile bootstrap over seeds. Growth is the slope of log R(t) against log t over rounds "
    f"t >= {GROWTH_WINDOW_START:g} T (about 1: linear regret, 0.5: sqrt(T), 0: regret stopped growing). "
    "Across tasks, R(T) is divided by the task's reference agent's mean (random when it ran, else the worst "
    "agent), and the 95% CIs are stratified bootstrap CIs (seeds resampled within each task)."
)


def _number(value: float, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) < 0.5 * 10.0**-digits:
        value = 0.0  # no "-0.00" for an optimum met up to rounding
    return f"{value:.{digits}f}"


def _interval(low: float, high: float, digits: int = 2) -> str:
    if math.isnan(low) or math.isnan(high):
        return "n/a"
    return f"[{_number(low, digits)}, {_number(high, digits)}]"


def _markdown(header: list[str], body: list[list[str]]) -> str:
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(escape(cell) for cell in header) + " |"]
    lines.append("|" + "|".join("---" if index < 2 else "---:" for index in range(len(header))) + "|")
    lines.extend("| " + " | ".join(escape(cell) for cell in row) + " |" for row in body)
    return "\n".join(lines)


def _tables(leaderboard: Leaderboard) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of every table, shared by the Markdown and HTML outputs."""
    tables = []
    tables.append(
        (
            "All tasks (normalised regret: 0 = optimal, 1 = reference)",
            "Ranked by IQM. Reference per task: "
            + ", ".join(f"{task}: {agent}" for task, agent in leaderboard.references.items())
            + ".",
            ["rank", "agent", "tasks", "runs", "mean", "95% CI", "IQM", "95% CI (IQM)", "ms/round"],
            [
                [
                    str(row.rank),
                    row.agent,
                    str(row.tasks),
                    str(row.runs),
                    _number(row.mean, 3),
                    _interval(row.mean_ci_low, row.mean_ci_high, 3),
                    _number(row.iqm, 3),
                    _interval(row.iqm_ci_low, row.iqm_ci_high, 3),
                    _number(row.ms_per_round, 2),
                ]
                for row in leaderboard.aggregate
            ],
        )
    )
    for task in leaderboard.tasks:
        rows = leaderboard.rows_for(task)
        seeds = leaderboard.task_seeds.get(task, [])
        tables.append(
            (
                task,
                f"T = {rows[0].rounds} rounds, {len(seeds)} seed(s).",
                ["rank", "agent", "seeds", "mean R(T)", "95% CI", "IQM R(T)", "growth", "normalised", "ms/round"],
                [
                    [
                        str(row.rank),
                        row.agent,
                        str(row.runs),
                        _number(row.mean),
                        _interval(row.ci_low, row.ci_high),
                        _number(row.iqm),
                        _number(row.growth_exponent),
                        _number(row.normalized_mean, 3),
                        _number(row.ms_per_round, 2),
                    ]
                    for row in rows
                ],
            )
        )
    if len(leaderboard.agents) > 1:
        tables.append(
            (
                "Probability of improvement",
                "P(row agent has lower final regret than column agent) over pairs of runs (ties count 1/2), "
                "averaged over the tasks both played.",
                ["agent", *leaderboard.agents],
                [
                    [first]
                    + [
                        "-" if first == second else _number(leaderboard.improvement.get((first, second), math.nan))
                        for second in leaderboard.agents
                    ]
                    for first in leaderboard.agents
                ],
            )
        )
    return tables


def markdown_report(leaderboard: Leaderboard) -> str:
    """The leaderboard as Markdown: the cross-task table, one table per task, P(improvement)."""
    parts = [f"# {leaderboard.title}", "", f"{len(leaderboard.records)} runs. {_EXPLANATION}"]
    for title, note, header, body in _tables(leaderboard):
        parts.extend(["", f"## {title}", "", note, "", _markdown(header, body)])
    return "\n".join(parts) + "\n"


def _html_table(header: list[str], body: list[list[str]], matrix: bool = False) -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in body)
    attributes = ' class="matrix"' if matrix else ""
    return f"<table{attributes}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
table.matrix td, table.matrix th { text-align: center; }
table.matrix td:first-child { text-align: left; font-weight: 600; }
thead { background: #f2f2f2; }
tbody tr:first-child { background: #eef7ee; }
.note { color: #555; font-size: 0.9rem; }
figure { margin: 0 0 2rem; }
figure svg { max-width: 100%; height: auto; }
"""


def html_report(leaderboard: Leaderboard, svg_by_task: dict[str, str]) -> str:
    """One self-contained HTML page: every table and the inline SVG plots (no external files)."""
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    sections = [
        f"<h1>{html.escape(leaderboard.title)}</h1>",
        f'<p class="note">{len(leaderboard.records)} runs, generated {generated}. {html.escape(_EXPLANATION)}</p>',
    ]
    for title, note, header, body in _tables(leaderboard):
        sections.append(f"<h2>{html.escape(title)}</h2>")
        sections.append(f'<p class="note">{html.escape(note)}</p>')
        sections.append(_html_table(header, body, matrix=header[0] == "agent"))
        if title in svg_by_task:
            sections.append(f'<figure class="regret-plot">{svg_by_task[title]}</figure>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(leaderboard.title)}</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(sections)}</body></html>\n"
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "task"


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        if not rows:
            return
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_report(leaderboard: Leaderboard, out_dir: str | Path) -> dict[str, Path]:
    """Write every output (see the module docstring) into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    paths["markdown"] = out / "leaderboard.md"
    paths["markdown"].write_text(markdown_report(leaderboard), encoding="utf-8")

    svg_by_task = {}
    for task in leaderboard.tasks:
        figure = plot_task(leaderboard, task)
        for suffix in ("png", "svg"):
            path = out / f"regret_{_slug(task)}.{suffix}"
            figure.savefig(path, dpi=110)
            paths[f"{task}.{suffix}"] = path
        close_figure(figure)
        svg = paths[f"{task}.svg"].read_text(encoding="utf-8")
        svg_by_task[task] = svg[svg.index("<svg") :]
    if leaderboard.tasks:
        figure = plot_all(leaderboard)
        for suffix in ("png", "svg"):
            paths[f"regret_curves.{suffix}"] = out / f"regret_curves.{suffix}"
            figure.savefig(paths[f"regret_curves.{suffix}"], dpi=110)
        close_figure(figure)
    paths["html"] = out / "leaderboard.html"
    paths["html"].write_text(html_report(leaderboard, svg_by_task), encoding="utf-8")

    summary = [{key: _json_value(value) for key, value in asdict(row).items()} for row in leaderboard.rows]
    aggregate = [{key: _json_value(value) for key, value in asdict(row).items()} for row in leaderboard.aggregate]
    runs = []
    for record in leaderboard.records:
        spec = record.spec
        runs.append(
            {
                "run_key": spec.key,
                "task": spec.task_label,
                "agent": spec.agent_label,
                "env_id": spec.env_id,
                "env_kwargs": json.dumps(spec.env_kwargs, sort_keys=True),
                "agent_name": spec.agent,
                "agent_kwargs": json.dumps(spec.agent_kwargs, sort_keys=True),
                "seed": spec.seed,
                "rounds": spec.rounds,
                "final_regret": record.final_regret,
                **{key: _json_value(value) for key, value in sorted(record.metadata.items())},
            }
        )
    paths["summary.csv"] = out / "summary.csv"
    _write_csv(paths["summary.csv"], summary)
    paths["aggregate.csv"] = out / "aggregate.csv"
    _write_csv(paths["aggregate.csv"], aggregate)
    paths["runs.csv"] = out / "runs.csv"
    _write_csv(paths["runs.csv"], runs)
    paths["json"] = out / "leaderboard.json"
    document = {
        "title": leaderboard.title,
        "tasks": leaderboard.tasks,
        "agents": leaderboard.agents,
        "references": leaderboard.references,
        "summary": summary,
        "aggregate": aggregate,
        "probability_of_improvement": [
            {"agent": first, "other": second, "probability": value}
            for (first, second), value in leaderboard.improvement.items()
        ],
        "runs": runs,
    }
    paths["json"].write_text(json.dumps(document, indent=2, sort_keys=False), encoding="utf-8")
    return paths
