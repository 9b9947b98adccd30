"""Regret plots of a leaderboard (matplotlib, the Agg backend: no display).

Every plot says how many seeds it averages and what its band is. Where theory gives an agent's
regret exponent ``a`` (``R(T) = O(T^a (log T)^(1 - a))``), the bound's shape is drawn dashed in the
agent's colour, scaled to meet the agent's mean regret at the last point: the shape, not the
constant, is what the theorem fixes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation.leaderboard import Leaderboard
from tokenized_bandit_gym.evaluation.robust_statistics import bound_shape

BAND = "95% pointwise bootstrap CI of the mean"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def theory_shape(rounds: np.ndarray, exponent: float) -> np.ndarray:
    """``t^a (log t)^(1 - a)`` at each t in ``rounds`` ``(P,)`` (log t floored at log 2); returns ``(P,)``."""
    return bound_shape(rounds, exponent)


def scaled_theory(rounds: np.ndarray, exponent: float, last_value: float) -> np.ndarray:
    """:func:`theory_shape` scaled so that its value at ``rounds[-1]`` is ``last_value``; returns ``(P,)``."""
    shape = theory_shape(rounds, exponent)
    return shape * (last_value / shape[-1])


# Okabe and Ito's colour-blind-safe palette (yellow last: it is faint on white), then Tableau's colorblind10 for
# leaderboards with more agents; reference rows are drawn in black and greys, dotted.
AGENT_COLOURS = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#F0E442",
    "#006BA4",
    "#FF800E",
    "#ABABAB",
    "#595959",
    "#5F9ED1",
    "#C85200",
    "#898989",
    "#A2C8EC",
    "#FFBC79",
    "#CFCFCF",
)
REFERENCE_COLOURS = ("#000000", "#7F7F7F", "#4D4D4D", "#B3B3B3")

# Font sizes in points. The report's page shows the overview (18 in wide) in at most 1,168 CSS px, so 12 pt there
# is 12 * 4/3 * 1168 / (18 * 96) = 10.8 px; the per-task figures show at their natural size (12 pt = 16 px).
LEGEND_POINTS = 12.0
TICK_POINTS = 12.0
LABEL_POINTS = 12.0
TITLE_POINTS = 11.0
# Head room above the compared agents' highest point when reference rows are left out of the y-range.
Y_MARGIN = 0.08


def agent_colours(leaderboard: Leaderboard) -> dict[str, str]:
    """A distinct colour per agent: the ranked agents from :data:`AGENT_COLOURS`, references black and greys."""
    colours = {}
    agents = [agent for agent in leaderboard.agents if agent not in leaderboard.reference_agents]
    for index, agent in enumerate(agents):
        colours[agent] = AGENT_COLOURS[index % len(AGENT_COLOURS)]
    references = [agent for agent in leaderboard.agents if agent in leaderboard.reference_agents]
    for index, agent in enumerate(references):
        colours[agent] = REFERENCE_COLOURS[index % len(REFERENCE_COLOURS)]
    return colours


def _label(leaderboard: Leaderboard, agent: str, off_scale: float | None = None) -> str:
    if agent not in leaderboard.reference_agents:
        return agent
    return f"{agent} (reference" + (f"; off scale, ends at {off_scale:.3g})" if off_scale is not None else ")")


def _figure_and_axis(axis: Any | None) -> tuple[Any, Any]:
    """``(figure, axis)``: a new 7.2 x 4.8 in figure unless ``axis`` is given."""
    plt = _pyplot()
    if axis is None:
        figure, axis = plt.subplots(figsize=(7.2, 4.8))
    else:
        figure = axis.figure
    return figure, axis


def _style_axis(axis: Any, title: str, xlabel: str, ylabel: str, legend_at: str) -> None:
    """Title, labels, grid, tick and legend sizes of one panel (see :data:`LEGEND_POINTS`); legend at ``legend_at``."""
    axis.set_title(title, fontsize=TITLE_POINTS)
    axis.set_xlabel(xlabel, fontsize=LABEL_POINTS)
    axis.set_ylabel(ylabel, fontsize=LABEL_POINTS)
    axis.tick_params(labelsize=TICK_POINTS, which="both")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=LEGEND_POINTS, framealpha=0.85, loc=legend_at)


def _theory_line(
    axis: Any, x: np.ndarray, exponent: float, last_value: float, color: Any, agent: str, var: str
) -> np.ndarray:
    """Draw theory's bound shape in ``var`` (t or T), dashed, scaled to ``last_value`` at ``x[-1]``; returns it."""
    values = scaled_theory(x, exponent, last_value)
    axis.plot(
        x,
        values,
        "--",
        color=color,
        linewidth=1.2,
        label=f"{agent}: theory {var}^{exponent:.2g} (log {var})^{1 - exponent:.2g}, scaled",
    )
    return values


def compared_range(lows: list[np.ndarray], highs: list[np.ndarray]) -> tuple[float, float]:
    """The y-range that shows every compared curve: from min(0, lowest) to the highest point, with head room."""
    low = min(0.0, min(float(np.min(values)) for values in lows))
    high = max(float(np.max(values)) for values in highs)
    span = max(high - low, 1e-12)
    return low - Y_MARGIN * span * (low < 0), high + Y_MARGIN * span


def plot_task(leaderboard: Leaderboard, task: str, axis: Any | None = None) -> Any:
    """Mean cumulative regret of every agent on ``task`` with its band and theory's shape; returns the figure.

    The y-range is set by the compared (ranked) agents: a reference row (random, an oracle) that runs
    off it is drawn clipped, and its legend entry says where it ends.
    """
    figure, axis = _figure_and_axis(axis)
    colours = agent_colours(leaderboard)
    swept = leaderboard.horizon_points.get(task, {})
    task_curves = leaderboard.curves.get(task, {})
    compared = [
        agent for agent in leaderboard.agents if agent in task_curves and agent not in leaderboard.reference_agents
    ]
    lows = [task_curves[agent].low for agent in compared]
    highs = [task_curves[agent].high for agent in compared]
    y_range = compared_range(lows, highs) if lows else None
    for agent in leaderboard.agents:
        curve = task_curves.get(agent)
        if curve is None:
            continue
        reference = agent in leaderboard.reference_agents
        off_scale = (
            y_range is not None and reference and not np.all((curve.mean >= y_range[0]) & (curve.mean <= y_range[1]))
        )
        color = colours[agent]
        label = _label(leaderboard, agent, float(curve.mean[-1]) if off_scale else None)
        # Earlier agents are drawn wider, so that two agents with the same curve both stay visible.
        width = 2.0 if reference else max(1.4, 3.2 - 0.6 * compared.index(agent))
        axis.plot(curve.rounds, curve.mean, ":" if reference else "-", color=color, label=label, linewidth=width)
        axis.fill_between(curve.rounds, curve.low, curve.high, color=color, alpha=0.18, linewidth=0)
        exponent = leaderboard.theory_exponent(task, agent)
        if exponent is not None and agent not in swept and curve.mean[-1] > 0:
            _theory_line(axis, curve.rounds, exponent, float(curve.mean[-1]), color, agent, "t")
    if y_range is not None:
        axis.set_ylim(*y_range)
    seeds = len(leaderboard.task_seeds.get(task, []))
    _style_axis(axis, f"{task}\nmean of {seeds} seeds; band: {BAND}", "round t", "cumulative regret R(t)", "best")
    figure.tight_layout()
    return figure


def plot_horizons(leaderboard: Leaderboard, task: str, axis: Any | None = None) -> Any:
    """Final regret R(T) against the horizon T (log-log) for the agents run at several horizons; returns the figure.

    Every horizon gets its own labelled tick (a log axis would otherwise label only powers of ten).
    """
    figure, axis = _figure_and_axis(axis)
    colours = agent_colours(leaderboard)
    seeds = set()
    horizons: set[int] = set()
    for agent in leaderboard.agents:
        points = leaderboard.horizon_points.get(task, {}).get(agent)
        if points is None or not np.all(points.mean > 0):
            continue
        seeds.add(points.seeds)
        horizons.update(int(h) for h in points.horizons)
        color = colours[agent]
        errors = np.stack([points.mean - points.low, points.high - points.mean]).clip(min=0.0)  # (2, H)
        axis.errorbar(
            points.horizons,
            points.mean,
            yerr=errors,
            fmt="o:" if agent in leaderboard.reference_agents else "o-",
            color=color,
            capsize=3,
            label=_label(leaderboard, agent),
        )
        exponent = leaderboard.theory_exponent(task, agent)
        if exponent is not None:
            _theory_line(axis, points.horizons, exponent, float(points.mean[-1]), color, agent, "T")
    axis.set(xscale="log", yscale="log")
    if horizons:
        ticks = sorted(horizons)
        axis.set_xticks(ticks, [f"{tick:,}" for tick in ticks])
        axis.set_xticks([], minor=True)
        axis.set_xlim(ticks[0] / 1.15, ticks[-1] * 1.15)
        axis.yaxis.set_major_locator(_pyplot().LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(_pyplot().FuncFormatter(lambda value, _: f"{value:g}"))
        axis.yaxis.set_minor_formatter(_pyplot().NullFormatter())
    count = ", ".join(str(value) for value in sorted(seeds)) or "0"
    title = f"{task}: regret against the horizon\nmean of {count} seeds per T; bars: 95% bootstrap CI"
    _style_axis(axis, title, "horizon T", "final regret R(T)", "upper left")
    figure.tight_layout()
    return figure


def plot_all(leaderboard: Leaderboard) -> Any:
    """The overview: one panel per task, then one per task run at several horizons (three per row)."""
    plt = _pyplot()
    panels = [(plot_task, task) for task in leaderboard.tasks]
    panels += [(plot_horizons, task) for task in leaderboard.tasks if leaderboard.horizon_points.get(task)]
    count = max(1, len(panels))
    columns = min(3, count)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6.0 * columns, 5.0 * rows), squeeze=False)
    for axis, (plot, task) in zip(axes.flat, panels, strict=False):
        plot(leaderboard, task, axis=axis)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    figure.suptitle(
        "Cumulative regret, mean over seeds; dashed: theory's bound shape, scaled (where the task's theorem applies)",
        fontsize=LABEL_POINTS + 1,
    )
    figure.tight_layout()
    return figure


def close_figure(figure: Any) -> None:
    """Release a figure made by :func:`plot_task`, :func:`plot_horizons` or :func:`plot_all`."""
    _pyplot().close(figure)
