"""Cumulative-regret curves with 95% bootstrap bands (matplotlib, the Agg backend: no display)."""

from __future__ import annotations

import math
from typing import Any

from tokenized_bandit_gym.evaluation.leaderboard import Leaderboard


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_task(leaderboard: Leaderboard, task: str, axis: Any | None = None) -> Any:
    """Mean cumulative regret of every agent on ``task`` with its band; returns the figure."""
    plt = _pyplot()
    if axis is None:
        figure, axis = plt.subplots(figsize=(6.4, 4.2))
    else:
        figure = axis.figure
    palette = plt.get_cmap("tab10")
    for index, agent in enumerate(leaderboard.agents):
        curve = leaderboard.curves.get(task, {}).get(agent)
        if curve is None:
            continue
        color = palette(index % 10)
        axis.plot(curve.rounds, curve.mean, color=color, label=agent, linewidth=1.6)
        axis.fill_between(curve.rounds, curve.low, curve.high, color=color, alpha=0.2, linewidth=0)
    axis.set(title=task, xlabel="round t", ylabel="cumulative regret R(t)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def plot_all(leaderboard: Leaderboard) -> Any:
    """One panel per task, side by side (at most three per row); returns the figure."""
    plt = _pyplot()
    count = max(1, len(leaderboard.tasks))
    columns = min(3, count)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6.0 * columns, 4.2 * rows), squeeze=False)
    for axis, task in zip(axes.flat, leaderboard.tasks, strict=False):
        plot_task(leaderboard, task, axis=axis)
    for axis in list(axes.flat)[len(leaderboard.tasks) :]:
        axis.set_visible(False)
    figure.suptitle("Cumulative regret (mean over seeds, 95% bootstrap band)")
    figure.tight_layout()
    return figure


def close_figure(figure: Any) -> None:
    """Release a figure made by :func:`plot_task` or :func:`plot_all`."""
    _pyplot().close(figure)
