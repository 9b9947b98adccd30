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
    dpi: int = 100,
) -> None:
    """Save a row of panels (one per distance), both groupings on each panel, 1,600 px wide for five distances.

    Args:
        report: The diagnostics' result.
        path: Output file (PNG).
        distances: Distances to draw, one panel each.
        title: Figure title (default: the model and dataset from ``report.settings``).
        dpi: Resolution (pixels per inch; each panel is 3.2 in wide).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(distances), figsize=(3.2 * len(distances), 3.6), squeeze=False)
    styles = {"all": ("#0072B2", "o"), "diverged": ("#D55E00", "s")}  # Okabe-Ito: colour-blind safe
    for axis, name in zip(axes[0], distances, strict=True):
        for grouping in GROUPINGS:
            summary = report.summaries[grouping][name]
            color, marker = styles[grouping]
            axis.plot(summary.common_suffix, summary.mean, marker=marker, color=color, markersize=4, label=grouping)
            axis.fill_between(
                summary.common_suffix, summary.mean - summary.std, summary.mean + summary.std, color=color, alpha=0.15
            )
        axis.set_title(DISTANCE_LABELS[name], fontsize=11)
        axis.set_xlabel("common tokens in suffix", fontsize=11)
        axis.tick_params(labelsize=10)
    axes[0][0].set_ylabel("distance (mean +/- std)", fontsize=11)
    axes[0][0].legend(fontsize=10)
    settings = report.settings
    figure.suptitle(title or f"DDMC: {settings.get('model', '?')} on {settings.get('dataset', '?')}", fontsize=12)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
