"""Leaderboard outputs: a Markdown table, a self-contained HTML page, plots, CSV and JSON.

Every output opens with the paper's claims the runs test, each beside what was measured and a
verdict (:mod:`leaderboard_claims`); the tasks follow in the order of those claims.
``write_report(leaderboard, out_dir)`` writes::

    leaderboard.md      the claims table, then the Markdown tables (also what ``tbg run`` prints)
    leaderboard.html    one self-contained page: the claims, the headline, each task's table, caveat and
                        inline SVG plots, the overview figure, the cross-task tables, then the
                        provenance; no external files
    regret_curves.png   the overview: every task's curves (also .svg), and regret_<task>.png/.svg per
                        task (horizons_<task>.png/.svg for a task run at several horizons)
    summary.csv         one row per agent and task; aggregate.csv one row per agent; claims.csv one row per
                        claim
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

import numpy as np

from tokenized_bandit_gym.evaluation.leaderboard import (
    BENCHMARKS,
    GROWTH_WINDOW_START,
    HorizonPoints,
    Leaderboard,
    RegretCurve,
    TaskAgentRow,
)
from tokenized_bandit_gym.evaluation.regret_plots import BAND, close_figure, plot_all, plot_horizons, plot_task

_EXPLANATION = (
    "Regret is the final cumulative regret R(T) = sum_t [u(x_t, y*_t) - u(x_t, y_t)] against each task's "
    "benchmark y*_t, stated with the task: the exact optimum, or on LLM tasks greedy decoding (or beam search) "
    "with the true utility, which an agent can beat, so regret there can be negative (lower is better). Mean and "
    "IQM (interquartile mean) are over seeds; the 95% CI of the mean is a percentile bootstrap over seeds. Growth "
    "is the slope of log R(t) against log t over rounds "
    f"t >= {GROWTH_WINDOW_START:g} T of one run (about 1: linear regret, 0.5: sqrt(T), 0: regret stopped growing); "
    "theory (shown only on tasks where the theorem applies) is the exponent a of the paper's bound "
    "R(T) = O(T^a (log T)^(1 - a)) (EOFUL 0.5, Theorem 3.2; "
    "GreedyETC 2/3, Theorem 4.2); horizon is the slope of log mean R(T) against log T over runs at several "
    "horizons T, the quantity a bound in T describes. Rows marked 'ref' are reference agents (oracles, random): "
    "shown for scale, not ranked. Across tasks, R(T) is divided by the task's normalising agent's mean (random "
    "when it ran, else the worst agent), and the 95% CIs are stratified bootstrap CIs (seeds resampled within "
    "each task). Plots: mean over seeds, band: " + BAND + "; dashed: theory's bound shape scaled to the mean "
    "at the last point, where the theorem applies."
)

# One table: title, note, header, rows of cells, and per row "reference", "leader" or "".
Table = tuple[str, str, list[str], list[list[str]], list[str]]


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


def markdown_cell(text: str) -> str:
    """``text`` for one Markdown table cell: HTML-escaped, pipes escaped, line breaks as ``<br>``.

    ``<``, ``>`` and ``&`` are escaped as the HTML report escapes them; a raw line break would split the row.
    """
    escaped = html.escape(text, quote=False).replace("|", "\\|")
    return escaped.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")


def markdown_line(text: str) -> str:
    """``text`` for one Markdown line (a heading, a note): HTML-escaped, line breaks become spaces.

    Markdown passes raw HTML through, so a label such as ``<img onerror=...>`` would run in a viewer.
    """
    return " ".join(html.escape(text, quote=False).splitlines())


def _markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(markdown_cell(cell) for cell in header) + " |"]
    lines.append("|" + "|".join("---" if index < 2 else "---:" for index in range(len(header))) + "|")
    lines.extend("| " + " | ".join(markdown_cell(cell) for cell in row) + " |" for row in body)
    return "\n".join(lines)


def _rank(rank: int | None) -> str:
    if rank is None:
        return "-"
    return "ref" if rank == 0 else str(rank)


def _row_kind(reference: bool, rank: int | None) -> str:
    """The row's HTML class: ``"reference"``, ``"leader"`` (ranked first) or ``""``."""
    if reference:
        return "reference"
    return "leader" if rank == 1 else ""


def _row_interval(row: TaskAgentRow) -> str:
    """The row's 95% CI, saying why when it has zero width because every seed gave the same R(T)."""
    interval = _interval(row.ci_low, row.ci_high)
    return f"{interval} (all {row.runs} seeds identical)" if row.seeds_identical else interval


_NO_SPEC = (
    "No leaderboard spec was given or stored with these runs (tbg report --spec FILE gives one), so this report "
    "cannot show the tasks' caveats, the tasks where a theorem applies (theory exponents and curves), the spec's "
    "reference flags, or the horizon analysis (runs at a task's extra horizons appear as tasks of their own)."
)


def _benchmark_note(leaderboard: Leaderboard, task: str) -> str:
    kind = leaderboard.benchmarks.get(task, "")
    return f"Benchmark: {BENCHMARKS.get(kind, kind or 'not recorded')}."


def _tables(leaderboard: Leaderboard) -> list[Table]:
    """(title, note, header, rows, row kinds) of every table, shared by the Markdown and HTML outputs.

    The tasks' tables come first (in the leaderboard's task order: the claims' order), then the rankings.
    """
    tables: list[Table] = []
    rankings: list[Table] = [
        (
            "All tasks (normalised regret: 0 = optimal, 1 = the task's normalising agent)",
            "Ranked by IQM; 'ref' rows are reference agents, not ranked; '-': no rank. Normalising agent per task: "
            + ", ".join(f"{task}: {agent}" for task, agent in leaderboard.references.items())
            + "."
            + (f" {leaderboard.aggregate_note}" if leaderboard.aggregate_note else ""),
            ["rank", "agent", "tasks", "runs", "mean", "95% CI", "IQM", "95% CI (IQM)", "ms/round"],
            [
                [
                    _rank(row.rank),
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
            [_row_kind(row.reference, row.rank) for row in leaderboard.aggregate],
        )
    ]
    for task in leaderboard.tasks:
        rows = leaderboard.rows_for(task)
        seeds = leaderboard.task_seeds.get(task, [])
        swept = any(not math.isnan(row.horizon_exponent) for row in rows)
        theory = task in leaderboard.theory_tasks
        header = ["rank", "agent", "seeds", "mean R(T)", "95% CI", "IQM R(T)", "growth"]
        header += ["theory"] if theory else []
        header += ["horizon"] if swept else []
        header += ["normalised", "ms/round"]
        body = []
        for row in rows:
            cells = [_rank(row.rank), row.agent, str(row.runs), _number(row.mean), _row_interval(row)]
            cells += [_number(row.iqm), _number(row.growth_exponent)]
            cells += [_number(row.theory_exponent)] if theory else []
            cells += [_number(row.horizon_exponent)] if swept else []
            cells += [_number(row.normalized_mean, 3), _number(row.ms_per_round, 2)]
            body.append(cells)
        note = f"T = {rows[0].rounds} rounds, {len(seeds)} seed(s). {_benchmark_note(leaderboard, task)}"
        if task in leaderboard.theta_sources:
            note += f" Theta: {leaderboard.theta_sources[task]}."
        if task in leaderboard.regimes:
            note += f" Regime (tbg regime, beside appendix D): {leaderboard.regimes[task]}."
        if not theory:
            note += " No theory exponent: the spec does not say that a theorem applies to this task."
        if swept:
            horizons = sorted({int(h) for points in leaderboard.horizon_points[task].values() for h in points.horizons})
            note += f" Horizon exponent fitted over T = {', '.join(str(h) for h in horizons)}."
        tables.append((task, note, header, body, [_row_kind(row.reference, row.rank) for row in rows]))
    if len(leaderboard.agents) > 1:
        rankings.append(
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
                ["reference" if agent in leaderboard.reference_agents else "" for agent in leaderboard.agents],
            )
        )
    return tables + rankings


CLAIMS_TITLE = "The paper's claims, measured"


def _claims_table(leaderboard: Leaderboard) -> Table:
    """(title, note, header, rows, row kinds) of the claims block; a row's kind is its verdict's CSS class."""
    note = (
        "Each claim of the paper these runs can test, beside what they measured (95% intervals: bootstrap over "
        "seeds). A bound is an upper bound: an exponent below it is consistent. Verdict: consistent (the whole "
        "interval agrees), not consistent (the whole interval contradicts it), not settled (it straddles)."
    )
    if not leaderboard.claims:
        note = (
            "These runs test none of the paper's claims: no task says that a theorem applies (the spec's "
            "theorem_applies) for an agent with a theory exponent, and no task sets EOFUL beside the paper's "
            "alignment baselines."
        )
    header = ["claim", "task", "measured", "value [95% CI]", "theory", "verdict"]
    body = [
        [f"{claim.source}: {claim.statement}", claim.task, claim.quantity, claim.measured_text, claim.expected]
        + [claim.verdict]
        for claim in leaderboard.claims
    ]
    return CLAIMS_TITLE, note, header, body, [claim.verdict.replace(" ", "-") for claim in leaderboard.claims]


def _claims_markdown(leaderboard: Leaderboard) -> list[str]:
    """The claims block as Markdown lines: heading, note and table."""
    title, note, header, body, _ = _claims_table(leaderboard)
    lines = [f"## {title}", "", note]
    if body:
        lines.extend(["", _markdown(header, body)])
    return lines


def _claims_html(leaderboard: Leaderboard) -> str:
    """The claims block as one ``<section id="claims">``: table, note, and how each number was measured."""
    title, note, header, body, kinds = _claims_table(leaderboard)
    parts = [f'<section id="claims"><h2>{html.escape(title)}</h2>']
    if body:
        parts.append(_html_table(header, body, kinds))
        details = "".join(
            f"<li>{html.escape(claim.task)}, {html.escape(claim.statement)}: {html.escape(claim.detail)}.</li>"
            for claim in leaderboard.claims
        )
        parts.append(f"<details><summary>how each claim was measured</summary><ul>{details}</ul></details>")
    parts.append(f'<p class="claims-note">{html.escape(note)}</p></section>')
    return "".join(parts)


def _claim_rows(leaderboard: Leaderboard) -> list[dict[str, Any]]:
    """One dict per claim (claims.csv and the JSON's ``claims``), with its measured text and verdict."""
    return [
        {**{key: _json_value(value) for key, value in asdict(claim).items()}, "measured_text": claim.measured_text}
        for claim in leaderboard.claims
    ]


def _provenance_lines(leaderboard: Leaderboard) -> list[str]:
    """``name: value(s)`` lines of the runs' provenance (git commit, versions, platform, device)."""
    return [f"{key}: {', '.join(values)}" for key, values in leaderboard.provenance.items()]


def markdown_report(leaderboard: Leaderboard) -> str:
    """The leaderboard as Markdown: the claims, one table per task, the cross-task table, P(improvement)."""
    parts = [
        f"# {markdown_line(leaderboard.title)}",
        "",
        *_claims_markdown(leaderboard),
        "",
        "  \n".join(markdown_line(line) for line in leaderboard.headline),
        "",
    ]
    parts.append(f"{leaderboard.runs_summary}. {_EXPLANATION}")
    if not leaderboard.spec_given:
        parts.extend(["", _NO_SPEC])
    provenance = _provenance_lines(leaderboard)
    if provenance:
        parts.extend(["", "Provenance of the runs: " + "; ".join(provenance) + "."])
    for title, note, header, body, _ in _tables(leaderboard):
        caveat = leaderboard.caveats.get(title)
        note += f" Caveat: {caveat}" if caveat else ""
        parts.extend(["", f"## {markdown_line(title)}", "", markdown_line(note), "", _markdown(header, body)])
    return "\n".join(parts) + "\n"


def _html_table(header: list[str], body: list[list[str]], kinds: list[str], matrix: bool = False) -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    rows = "".join(
        (f'<tr class="{kind}">' if kind else "<tr>")
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
        + "</tr>"
        for row, kind in zip(body, kinds, strict=True)
    )
    attributes = ' class="matrix"' if matrix else ""
    return f"<table{attributes}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; padding: 0 1rem; max-width: 1200px; color: #222; }
h1 { font-size: 1.7rem; margin: 0 0 0.6rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
table.matrix td, table.matrix th { text-align: center; }
table.matrix td:first-child { text-align: left; font-weight: 600; }
thead { background: #f2f2f2; }
tr.leader { background: #eef7ee; }
tr.reference td { color: #666; font-style: italic; background: #f7f7f7; }
.headline { font-size: 1.05rem; line-height: 1.5; border-left: 4px solid #2a7; padding-left: 0.7rem; }
.note { color: #555; font-size: 0.9rem; }
.caveat { border-left: 3px solid #d9a400; padding-left: 0.6rem; }
figure { margin: 0 0 2rem; }
figure svg { max-width: 100%; height: auto; }
#claims table { font-size: 0.95rem; margin-bottom: 0.3rem; }
#claims th, #claims td { text-align: left; }
#claims h2 { margin: 0.4rem 0; font-size: 1.25rem; }
#claims details, .claims-note { font-size: 0.85rem; color: #555; margin: 0.2rem 0 0.8rem; }
tr.consistent td:last-child { background: #dcefe3; font-weight: 600; }
tr.not-consistent td:last-child { background: #f6d8cf; font-weight: 600; }
tr.not-settled td:last-child { background: #f3ecd0; font-weight: 600; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
"""


def _provenance_html(leaderboard: Leaderboard) -> str:
    """The provenance section: one line per key (git commit, versions, platform, device), then the spec's text."""
    provenance = "".join(f"<li>{html.escape(line)}</li>" for line in _provenance_lines(leaderboard))
    spec = (
        f"<details><summary>the spec</summary><pre>{html.escape(leaderboard.spec_text)}</pre></details>"
        if leaderboard.spec_text
        else ""
    )
    return (
        f'<section id="provenance"><h2>Provenance</h2><ul>{provenance or "<li>not recorded</li>"}</ul>{spec}</section>'
    )


def _table_sections(leaderboard: Leaderboard, svg_by_task: dict[str, str]) -> list[str]:
    """Each table as HTML: its heading, note and caveat, the table, and the task's plots under it."""
    sections = []
    for title, note, header, body, kinds in _tables(leaderboard):
        sections.append(f"<h2>{html.escape(title)}</h2>")
        caveat = leaderboard.caveats.get(title)
        sections.append(f'<p class="note">{html.escape(note)}</p>')
        if caveat:
            sections.append(f'<p class="note caveat">Caveat: {html.escape(caveat)}</p>')
        sections.append(_html_table(header, body, kinds, matrix=header[0] == "agent"))
        if title in svg_by_task:
            sections.append(f'<figure class="regret-plot">{svg_by_task[title]}</figure>')
    return sections


def html_report(leaderboard: Leaderboard, svg_by_task: dict[str, str], overview_svg: str = "") -> str:
    """One self-contained HTML page (no external files).

    The page, in order: the title; the paper's claims beside what was measured; the three-line
    headline (leader, margin, confidence); the overview figure; the explanation; every task's table
    with its caveat and inline SVG plots (``svg_by_task`` maps a table title to one or more concatenated
    ``<svg>`` elements), in the claims' order; the cross-task rankings; the provenance of the runs (git
    commit, package, torch and transformers versions, platform, device; the spec's text when known).
    """
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    headline = "<br>".join(html.escape(line) for line in leaderboard.headline)
    explanation = f'<p class="note">{leaderboard.runs_summary}, generated {generated}. {html.escape(_EXPLANATION)}</p>'
    sections = [
        f"<h1>{html.escape(leaderboard.title)}</h1>",
        _claims_html(leaderboard),
        f'<p class="headline">{headline}</p>',
        f'<figure class="overview">{overview_svg}</figure>' if overview_svg else "",
        explanation,
        "" if leaderboard.spec_given else f'<p class="note caveat">{html.escape(_NO_SPEC)}</p>',
        *_table_sections(leaderboard, svg_by_task),
        _provenance_html(leaderboard),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(leaderboard.title)}</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(sections)}</body></html>\n"
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "task"


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` with a column for every key of any row (in order of first use), empty where a row lacks it.

    Runs differ in their metadata (an LLM run records ``theta_source``, a synthetic one does not).
    """
    with path.open("w", newline="", encoding="utf-8") as handle:
        if not rows:
            return
        columns = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


# JSON key -> attribute of the plotted series: horizon points (HorizonPoints) and regret curves (RegretCurve).
HORIZON_SERIES = {"horizons": "horizons", "mean": "mean", "ci_low": "low", "ci_high": "high"}
CURVE_SERIES = {"rounds": "rounds", "mean": "mean", "ci_low": "low", "ci_high": "high"}


def _series(points: HorizonPoints | RegretCurve, keys: dict[str, str]) -> dict[str, list[Any]]:
    return {key: [_json_value(value) for value in getattr(points, name).tolist()] for key, name in keys.items()}


def _arrays(entry: dict[str, Any], keys: dict[str, str]) -> dict[str, np.ndarray]:
    return {
        name: np.array([math.nan if value is None else value for value in entry[key]]) for key, name in keys.items()
    }


def _horizon_points(entry: dict[str, Any]) -> HorizonPoints:
    arrays = _arrays(entry, HORIZON_SERIES)
    return HorizonPoints(arrays["horizons"], arrays["mean"], arrays["low"], arrays["high"], seeds=int(entry["seeds"]))


def plotted_leaderboard(document: dict[str, Any]) -> Leaderboard:
    """What the plots need of a leaderboard, read back from its ``leaderboard.json`` (``document``).

    The curves, horizon points, roles and theory exponents come back; the tables do not (``rows``,
    ``aggregate`` and ``records`` are empty), so the result can be drawn (:func:`plot_all`) but not reported.
    """
    return Leaderboard(
        title=document["title"],
        tasks=list(document["tasks"]),
        agents=list(document["agents"]),
        rows=[],
        aggregate=[],
        improvement={},
        curves={
            task: {agent: RegretCurve(**_arrays(entry, CURVE_SERIES)) for agent, entry in by_agent.items()}
            for task, by_agent in document["curves"].items()
        },
        records=[],
        task_seeds={task: list(seeds) for task, seeds in document["task_seeds"].items()},
        reference_agents=set(document["reference_agents"]),
        theory_exponents=dict(document["theory_exponents"]),
        horizon_points={
            task: {agent: _horizon_points(entry) for agent, entry in by_agent.items()}
            for task, by_agent in document["horizons"].items()
        },
        theory_tasks=set(document["theory_tasks"]),
    )


# The CSV tables a report writes (NAME.csv), in this order; is_report_file knows them by this list too.
CSV_TABLES = ("summary", "aggregate", "runs", "claims")


def write_report(leaderboard: Leaderboard, out_dir: str | Path) -> dict[str, Path]:
    """Write every output (see the module docstring) into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    paths["markdown"] = out / "leaderboard.md"
    paths["markdown"].write_text(markdown_report(leaderboard), encoding="utf-8")

    def save(figure: Any, stem: str) -> str:
        """Write ``stem``.png and .svg; returns the SVG element."""
        for suffix in ("png", "svg"):
            paths[f"{stem}.{suffix}"] = out / f"{stem}.{suffix}"
            figure.savefig(paths[f"{stem}.{suffix}"], dpi=110)
        close_figure(figure)
        svg = paths[f"{stem}.svg"].read_text(encoding="utf-8")
        return svg[svg.index("<svg") :]

    svg_by_task = {}
    for task in leaderboard.tasks:
        svg_by_task[task] = save(plot_task(leaderboard, task), f"regret_{_slug(task)}")
        paths[f"{task}.png"], paths[f"{task}.svg"] = (
            paths[f"regret_{_slug(task)}.png"],
            paths[f"regret_{_slug(task)}.svg"],
        )
        if leaderboard.horizon_points.get(task):
            svg_by_task[task] += save(plot_horizons(leaderboard, task), f"horizons_{_slug(task)}")
    overview = save(plot_all(leaderboard), "regret_curves") if leaderboard.tasks else ""
    paths["html"] = out / "leaderboard.html"
    paths["html"].write_text(html_report(leaderboard, svg_by_task, overview), encoding="utf-8")

    summary = [
        {
            **{key: _json_value(value) for key, value in asdict(row).items()},
            "benchmark": leaderboard.benchmarks.get(row.task),
        }
        for row in leaderboard.rows
    ]
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
    claims = _claim_rows(leaderboard)
    tables = {"summary": summary, "aggregate": aggregate, "runs": runs, "claims": claims}
    for name in CSV_TABLES:
        paths[f"{name}.csv"] = out / f"{name}.csv"
        _write_csv(paths[f"{name}.csv"], tables[name])
    paths["json"] = out / "leaderboard.json"
    document = {
        "title": leaderboard.title,
        "claims": claims,
        "tasks": leaderboard.tasks,
        "agents": leaderboard.agents,
        "references": leaderboard.references,
        "reference_agents": sorted(leaderboard.reference_agents),
        "theory_exponents": leaderboard.theory_exponents,
        "horizon_runs": leaderboard.horizon_runs,
        "caveats": leaderboard.caveats,
        "headline": leaderboard.headline,
        "benchmarks": leaderboard.benchmarks,
        "theta_sources": leaderboard.theta_sources,
        "regimes": leaderboard.regimes,
        "theory_tasks": sorted(leaderboard.theory_tasks),
        "spec_given": leaderboard.spec_given,
        "aggregate_note": leaderboard.aggregate_note,
        "provenance": leaderboard.provenance,
        "horizons": {
            task: {
                agent: {**_series(points, HORIZON_SERIES), "seeds": points.seeds} for agent, points in by_agent.items()
            }
            for task, by_agent in leaderboard.horizon_points.items()
        },
        "task_seeds": leaderboard.task_seeds,
        "curves": {
            task: {agent: _series(curve, CURVE_SERIES) for agent, curve in by_agent.items()}
            for task, by_agent in leaderboard.curves.items()
        },
        "spec": leaderboard.spec_text,
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


# The names of the files :func:`write_report` writes: fixed ones, and a plot pair per task and per horizon sweep.
_REPORT_FILE = re.compile(
    rf"(leaderboard\.(html|md|json)|({'|'.join(CSV_TABLES)})\.csv|regret_curves\.(png|svg)"
    r"|(regret|horizons)_[A-Za-z0-9._-]+\.(png|svg))"
)


def is_report_file(path: Path) -> bool:
    """Whether ``path`` is a regular file named as :func:`write_report` names its outputs (of any report)."""
    return _REPORT_FILE.fullmatch(path.name) is not None and path.is_file() and not path.is_symlink()
