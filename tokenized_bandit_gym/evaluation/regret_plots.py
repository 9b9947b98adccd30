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

BAND = "95% pointwise bootstrap CI of the mean"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def theory_shape(rounds: np.ndarray, exponent: float) -> np.ndarray:
    """``t^a (log t)^(1 - a)`` at each t in ``rounds`` ``(P,)`` (log t floored at log 2); returns ``(P,)``."""
    t = np.asarray(rounds, dtype=np.float64)
    return t**exponent * np.log(np.maximum(t, 2.0)) ** (1.0 - exponent)


def scaled_theory(rounds: np.ndarray, exponent: float, last_value: float) -> np.ndarray:
    """:func:`theory_shape` scaled so that its value at ``rounds[-1]`` is ``last_value``; returns ``(P,)``."""
    shape = theory_shape(rounds, exponent)
    return shape * (last_value / shape[-1])


def _label(leaderboard: Leaderboard, agent: str) -> str:
    return f"{agent} (reference)" if agent in leaderboard.reference_agents else agent


def _figure_and_axis(axis: Any | None) -> tuple[Any, Any, Any]:
    """``(figure, axis, palette)``: a new 6.4 x 4.2 in figure unless ``axis`` is given."""
    plt = _pyplot()
    if axis is None:
        figure, axis = plt.subplots(figsize=(6.4, 4.2))
    else:
        figure = axis.figure
    return figure, axis, plt.get_cmap("tab10")


def _theory_line(
    axis: Any, x: np.ndarray, exponent: float, last_value: float, color: Any, agent: str, var: str
) -> None:
    """Draw theory's bound shape in ``var`` (t or T), dashed, scaled to ``last_value`` at ``x[-1]``."""
    axis.plot(
        x,
        scaled_theory(x, exponent, last_value),
        "--",
        color=color,
        linewidth=1.0,
        label=f"{agent}: theory {var}^{exponent:.2g} (log {var})^{1 - exponent:.2g}, scaled",
    )


def plot_task(leaderboard: Leaderboard, task: str, axis: Any | None = None) -> Any:
    """Mean cumulative regret of every agent on ``task`` with its band and theory's shape; returns the figure."""
    figure, axis, palette = _figure_and_axis(axis)
    swept = leaderboard.horizon_points.get(task, {})
    for index, agent in enumerate(leaderboard.agents):
        curve = leaderboard.curves.get(task, {}).get(agent)
        if curve is None:
            continue
        color = palette(index % 10)
        style = ":" if agent in leaderboard.reference_agents else "-"
        axis.plot(curve.rounds, curve.mean, style, color=color, label=_label(leaderboard, agent), linewidth=1.6)
        axis.fill_between(curve.rounds, curve.low, curve.high, color=color, alpha=0.2, linewidth=0)
        exponent = leaderboard.theory_exponent(task, agent)
        if exponent is not None and agent not in swept and curve.mean[-1] > 0:
            _theory_line(axis, curve.rounds, exponent, float(curve.mean[-1]), color, agent, "t")
    seeds = len(leaderboard.task_seeds.get(task, []))
    axis.set(xlabel="round t", ylabel="cumulative regret R(t)")
    axis.set_title(f"{task}\nmean of {seeds} seeds; band: {BAND}", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize="x-small")
    figure.tight_layout()
    return figure


def plot_horizons(leaderboard: Leaderboard, task: str, axis: Any | None = None) -> Any:
    """Final regret R(T) against the horizon T (log-log) for the agents run at several horizons; returns the figure."""
    figure, axis, palette = _figure_and_axis(axis)
    seeds = set()
    for index, agent in enumerate(leaderboard.agents):
        points = leaderboard.horizon_points.get(task, {}).get(agent)
        if points is None or not np.all(points.mean > 0):
            continue
        seeds.add(points.seeds)
        color = palette(index % 10)
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
    axis.set(xscale="log", yscale="log", xlabel="horizon T", ylabel="final regret R(T)")
    count = ", ".join(str(value) for value in sorted(seeds)) or "0"
    axis.set_title(
        f"{task}: regret against the horizon\nmean of {count} seeds per T; bars: 95% bootstrap CI", fontsize=9
    )
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize="x-small")
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
    figure, axes = plt.subplots(rows, columns, figsize=(6.0 * columns, 4.4 * rows), squeeze=False)
    for axis, (plot, task) in zip(axes.flat, panels, strict=False):
        plot(leaderboard, task, axis=axis)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    figure.suptitle(
        "Cumulative regret: mean over seeds; dashed (only where the task's theorem applies): theory's bound shape "
        "scaled to the mean at the end"
    )
    figure.tight_layout()
    return figure


def close_figure(figure: Any) -> None:
    """Release a figure made by :func:`plot_task`, :func:`plot_horizons` or :func:`plot_all`."""
    _pyplot().close(figure)
