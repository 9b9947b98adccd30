"""Figures 1 and 4 of the paper: mean +/- spread of each distance against the common-suffix length."""

from __future__ import annotations

import os

from tokenized_bandit_gym.evaluation.ddmc.ddmc_report import GROUPINGS, DDMCReport
from tokenized_bandit_gym.evaluation.ddmc.distances import DISTANCE_LABELS, DISTANCE_NAMES


def plot_ddmc_report(
    report: DDMCReport,
    path: str | os.PathLike[str],
    distances: tuple[str, ...] = DISTANCE_NAMES,
    title: str | None = None,
    dpi: int = 80,
) -> None:
    """Save a grid of panels (one column per distance), both groupings on each panel, as a small PNG.

    Args:
        report: The diagnostics' result.
        path: Output file (PNG).
        distances: Distances to draw, one panel each.
        title: Figure title (default: the model and dataset from ``report.settings``).
        dpi: Resolution; the default keeps the file small enough to commit.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(distances), figsize=(3.0 * len(distances), 2.8), squeeze=False)
    styles = {"all": ("tab:blue", "o"), "diverged": ("tab:red", "s")}
    for axis, name in zip(axes[0], distances, strict=True):
        for grouping in GROUPINGS:
            summary = report.summaries[grouping][name]
            color, marker = styles[grouping]
            axis.plot(summary.common_suffix, summary.mean, marker=marker, color=color, markersize=3, label=grouping)
            axis.fill_between(
                summary.common_suffix, summary.mean - summary.std, summary.mean + summary.std, color=color, alpha=0.15
            )
        axis.set_title(DISTANCE_LABELS[name], fontsize=9)
        axis.set_xlabel("common tokens in suffix", fontsize=8)
        axis.tick_params(labelsize=7)
    axes[0][0].set_ylabel("distance (mean +/- std)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    settings = report.settings
    figure.suptitle(title or f"DDMC: {settings.get('model', '?')} on {settings.get('dataset', '?')}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
