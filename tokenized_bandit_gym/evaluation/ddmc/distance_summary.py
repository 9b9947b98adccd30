"""Per-group statistics of one distance against the common-suffix length, and the numbers users compare."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from tokenized_bandit_gym.core.validation import check_int, check_real


@dataclass(frozen=True)
class DistanceSummary:
    """Mean and spread of one distance per common-suffix group, with two scalar trend measures.

    Attributes:
        common_suffix: ``(G,)`` group labels ``c`` that have at least ``min_group_size`` prefix pairs.
        count: ``(G,)`` prefix pairs per group.
        mean: ``(G,)`` mean distance per group.
        std: ``(G,)`` standard deviation per group (the paper's spread).
        decreasing_share: Share of consecutive groups ``(c, c + 1)`` whose mean decreases (NaN without any).
        spearman: Spearman rank correlation between ``c`` and the distance over all prefix pairs with
            ``c <= max_common`` (negative: distance falls with more common suffix).
        spearman_low: Lower end of the 95% bootstrap interval of ``spearman`` (items resampled).
        spearman_high: Upper end of that interval.
    """

    common_suffix: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    decreasing_share: float
    spearman: float
    spearman_low: float
    spearman_high: float

    def mean_at(self, common: int) -> float:
        """Return the mean distance of group ``common`` (NaN when the group is absent or too small)."""
        hits = np.flatnonzero(self.common_suffix == common)
        return float(self.mean[hits[0]]) if hits.size else float("nan")

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-serialisable dictionary."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}


def summarize_distances(
    common_suffix: np.ndarray,
    distances: np.ndarray,
    items: np.ndarray,
    max_common: int = 10,
    min_group_size: int = 5,
    num_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[DistanceSummary]:
    """Summarize several distance columns against the common-suffix length.

    Args:
        common_suffix: ``(N,)`` common-suffix length of each prefix pair.
        distances: ``(N, D)`` distances, one column per distance function.
        items: ``(N,)`` dataset item of each prefix pair; the bootstrap resamples items, so pairs that share
            a query stay together.
        max_common: Groups ``c = 0 .. max_common`` are reported; larger ``c`` are left out of every number.
        min_group_size: Groups with fewer prefix pairs are left out of the means and the decreasing share.
        num_bootstrap: Bootstrap resamples for the Spearman interval (0: no interval, NaN ends).
        confidence: Coverage of the interval.
        seed: Seed of the bootstrap's ``np.random.Generator``.

    Returns:
        One summary per column of ``distances``.

    Raises:
        ValueError: Shapes disagree or an argument is out of range.
    """
    max_common = check_int("max_common", max_common, minimum=0)
    min_group_size = check_int("min_group_size", min_group_size, minimum=1)
    num_bootstrap = check_int("num_bootstrap", num_bootstrap, minimum=0)
    confidence = check_real("confidence", confidence, low=0.0, high=1.0)
    common = np.asarray(common_suffix)
    values = np.asarray(distances, dtype=np.float64)
    owners = np.asarray(items)
    if values.ndim != 2 or common.shape != (values.shape[0],) or owners.shape != common.shape:
        raise ValueError(
            f"need common_suffix (N,), distances (N, D), items (N,); got {common.shape}, {values.shape}, {owners.shape}"
        )
    keep = common <= max_common
    common, values, owners = common[keep], values[keep], owners[keep]
    rho = _spearman_columns(common, values)  # (D,)
    low, high = _bootstrap_interval(common, values, owners, num_bootstrap, confidence, seed)  # (D,), (D,)
    labels, counts = np.unique(common, return_counts=True)
    labels, counts = labels[counts >= min_group_size], counts[counts >= min_group_size]
    summaries = []
    for column in range(values.shape[1]):
        means = np.array([values[common == c, column].mean() for c in labels])  # (G,)
        stds = np.array([values[common == c, column].std() for c in labels])  # (G,)
        consecutive = np.flatnonzero(np.diff(labels) == 1)
        share = float(np.mean(means[consecutive + 1] < means[consecutive])) if consecutive.size else float("nan")
        summaries.append(
            DistanceSummary(
                common_suffix=labels.astype(np.int64),
                count=counts.astype(np.int64),
                mean=means,
                std=stds,
                decreasing_share=share,
                spearman=float(rho[column]),
                spearman_low=float(low[column]),
                spearman_high=float(high[column]),
            )
        )
    return summaries


def _spearman_columns(common: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return the ``(D,)`` Spearman correlations of ``common`` with each column of ``values`` (NaN if constant)."""
    if common.shape[0] < 3 or np.all(common == common[0]):
        return np.full(values.shape[1], np.nan)
    ranks_c = stats.rankdata(common)  # (N,)
    ranks_v = stats.rankdata(values, axis=0)  # (N, D)
    centred_c = ranks_c - ranks_c.mean()  # (N,)
    centred_v = ranks_v - ranks_v.mean(axis=0)  # (N, D)
    denominator = np.sqrt((centred_c**2).sum() * (centred_v**2).sum(axis=0))  # (D,)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (centred_c @ centred_v) / denominator


def _bootstrap_interval(
    common: np.ndarray, values: np.ndarray, owners: np.ndarray, num_bootstrap: int, confidence: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the Spearman correlations over item-level bootstrap resamples."""
    nan = np.full(values.shape[1], np.nan)
    if num_bootstrap == 0 or common.shape[0] == 0:
        return nan, nan
    order = np.argsort(owners, kind="stable")
    _, starts = np.unique(owners[order], return_index=True)
    groups = np.split(order, starts[1:])  # row indices of each item
    rng = np.random.default_rng(seed)
    draws = np.empty((num_bootstrap, values.shape[1]))
    for b in range(num_bootstrap):
        chosen = rng.integers(0, len(groups), size=len(groups))
        rows = np.concatenate([groups[i] for i in chosen])
        draws[b] = _spearman_columns(common[rows], values[rows])
    tail = 100.0 * (1.0 - confidence) / 2.0
    if np.all(np.isnan(draws)):
        return nan, nan
    low, high = np.nanpercentile(draws, [tail, 100.0 - tail], axis=0)
    return low, high
