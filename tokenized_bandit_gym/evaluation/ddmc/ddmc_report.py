"""The DDMC diagnostics' result: both groupings, every distance, and the figures users compare."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation.ddmc.distance_summary import DistanceSummary, summarize_distances
from tokenized_bandit_gym.evaluation.ddmc.distances import DISTANCE_NAMES
from tokenized_bandit_gym.evaluation.ddmc.prefix_pair_table import PrefixPairTable

GROUPINGS: dict[str, str] = {
    "all": "every aligned prefix pair (the paper's grouping)",
    "diverged": "prefix pairs that have already diverged (first differing token at or before k)",
}
"""The two groupings reported side by side. Identical prefixes (the shared query) have distance 0 by
construction and fill the high common-suffix groups of ``"all"``, so that grouping alone makes any model look
DDMC; ``"diverged"`` drops them."""


@dataclass(frozen=True)
class DDMCReport:
    """Summaries of every distance under both groupings, with what they were measured on.

    Attributes:
        summaries: ``summaries[grouping][distance]`` for grouping in :data:`GROUPINGS` and distance in
            ``DISTANCE_NAMES``.
        num_items: Dataset items (questions/dialogues) compared.
        num_pairs: Answer pairs compared.
        num_prefix_pairs: Aligned prefix pairs per grouping.
        settings: What the numbers were measured with (model, dataset, limits, seed, ...).
    """

    summaries: dict[str, dict[str, DistanceSummary]]
    num_items: int
    num_pairs: int
    num_prefix_pairs: dict[str, int]
    settings: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-serialisable dictionary."""
        return {
            "settings": dict(self.settings),
            "num_items": self.num_items,
            "num_pairs": self.num_pairs,
            "num_prefix_pairs": dict(self.num_prefix_pairs),
            "summaries": {g: {d: s.to_dict() for d, s in by.items()} for g, by in self.summaries.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DDMCReport:
        """The report :meth:`to_dict` (or :meth:`save_json`'s file) describes; ``null`` reads back as NaN."""
        arrays = ("common_suffix", "count", "mean", "std")

        def summary(entry: dict[str, Any]) -> DistanceSummary:
            values: dict[str, Any] = {
                key: np.array(value, dtype=np.float64 if key in ("mean", "std") else np.int64)
                if key in arrays
                else (math.nan if value is None else float(value))
                for key, value in entry.items()
            }
            return DistanceSummary(**values)

        summaries = data["summaries"]
        return cls(
            summaries={
                grouping: {name: summary(entry) for name, entry in by_distance.items()}
                for grouping, by_distance in summaries.items()
            },
            num_items=int(data["num_items"]),
            num_pairs=int(data["num_pairs"]),
            num_prefix_pairs=dict(data["num_prefix_pairs"]),
            settings=dict(data.get("settings", {})),
        )

    def save_json(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_dict` as JSON (NaN written as ``null``)."""

        def clean(value: object) -> object:
            if isinstance(value, float) and math.isnan(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list):
                return [clean(v) for v in value]
            return value

        with open(path, "w", encoding="utf-8") as handle:
            json.dump(clean(self.to_dict()), handle, indent=2)

    def format_text(self, distances: tuple[str, ...] = DISTANCE_NAMES, max_rows: int = 6) -> str:
        """Return a plain-text report: the trend numbers, then the group means of both groupings side by side.

        Args:
            distances: Distances to show.
            max_rows: Common-suffix groups shown in the side-by-side table (``c = 0 .. max_rows - 1``).
        """
        lines = [
            f"DDMC diagnostics: {self.num_items} items, {self.num_pairs} answer pairs, prefix pairs: "
            + ", ".join(f"{g} {n}" for g, n in self.num_prefix_pairs.items()),
        ]
        lines += [f"  {k}: {v}" for k, v in self.settings.items()]
        lines.append("")
        lines.append(f"{'distance':<9}{'grouping':<10}{'decr. share':>12}{'Spearman':>10}{'95% interval':>20}")
        for name in distances:
            for grouping, summary in ((g, self.summaries[g][name]) for g in self.summaries):
                interval = f"[{summary.spearman_low:+.3f}, {summary.spearman_high:+.3f}]"
                lines.append(
                    f"{name:<9}{grouping:<10}{summary.decreasing_share:>12.2f}{summary.spearman:>+10.3f}{interval:>20}"
                )
        lines.append("")
        groupings = list(self.summaries)
        header = f"{'c':>3} " + "".join(f"{f'{g} mean+-std (n)':>30}" for g in groupings)
        for name in distances:
            lines.append(f"{name}:")
            lines.append(header)
            for c in range(max_rows):
                cells = []
                for g in groupings:
                    summary = self.summaries[g][name]
                    hits = np.flatnonzero(summary.common_suffix == c)
                    if hits.size:
                        i = hits[0]
                        cells.append(f"{summary.mean[i]:.3f} +- {summary.std[i]:.3f} ({summary.count[i]})")
                    else:
                        cells.append("-")
                lines.append(f"{c:>3} " + "".join(f"{cell:>30}" for cell in cells))
        return "\n".join(lines)


def summarize_ddmc(
    table: PrefixPairTable,
    max_common: int = 10,
    min_group_size: int = 5,
    num_bootstrap: int = 200,
    seed: int = 0,
    settings: dict[str, object] | None = None,
) -> DDMCReport:
    """Summarize a prefix-pair table under both groupings of :data:`GROUPINGS`.

    Args:
        table: The aligned prefix pairs.
        max_common: Largest common-suffix group reported.
        min_group_size: Smallest group reported.
        num_bootstrap: Bootstrap resamples (of items) for the Spearman intervals.
        seed: Bootstrap seed.
        settings: Recorded in the report as measured-with metadata.

    Returns:
        The report.
    """
    masks = {"all": np.ones(len(table), dtype=bool), "diverged": table.diverged}
    summaries: dict[str, dict[str, DistanceSummary]] = {}
    for grouping, mask in masks.items():
        columns = summarize_distances(
            table.common_suffix[mask],
            table.distances[mask],
            table.item[mask],
            max_common=max_common,
            min_group_size=min_group_size,
            num_bootstrap=num_bootstrap,
            seed=seed,
        )
        summaries[grouping] = dict(zip(DISTANCE_NAMES, columns, strict=True))
    return DDMCReport(
        summaries=summaries,
        num_items=table.num_items,
        num_pairs=table.num_pairs,
        num_prefix_pairs={g: int(m.sum()) for g, m in masks.items()},
        settings=dict(settings or {}),
    )
