"""Robust statistics of final cumulative regret over seeds and tasks (pure NumPy/SciPy functions).

Follows Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (NeurIPS 2021): the
interquartile mean (IQM), stratified bootstrap confidence intervals (resample seeds within each
task, independently across tasks), and the probability of improvement. Lower regret is better.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

# SciPy >= 1.15 names the generator ``rng``; older versions call it ``random_state``.
_RNG_KEYWORD = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Callable[..., Any], seed: int, **options: Any) -> Any:
    """``scipy.stats.bootstrap`` (percentile method, warnings silenced) with a seeded generator."""
    options[_RNG_KEYWORD] = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return stats.bootstrap(data, statistic, method="percentile", vectorized=True, **options)


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Interquartile mean: the mean of the middle 50% (``scipy.stats.trim_mean(x, 0.25)``)."""
    return stats.trim_mean(values, 0.25, axis=axis)


def pooled_mean(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean of the samples concatenated along ``axis`` (every run of every task weighs the same)."""
    return np.mean(np.concatenate(samples, axis=axis), axis=axis)


def pooled_iqm(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """IQM of the samples concatenated along ``axis``."""
    return stats.trim_mean(np.concatenate(samples, axis=axis), 0.25, axis=axis)


def stratified_bootstrap_ci(
    samples: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray] = pooled_mean,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic(*samples)``, resampling within each sample (stratum).

    ``scipy.stats.bootstrap`` with several samples and ``paired=False`` resamples each one
    independently: with one sample per task, that is the stratified bootstrap over tasks. A
    stratum with a single value resamples to itself. With no stratum of two or more values the
    interval is undefined and ``(nan, nan)`` is returned.

    Args:
        samples: one 1-d array per stratum (task), e.g. final regret per seed.
        statistic: vectorised ``f(*samples, axis=-1)``.
        confidence: the confidence level.
        resamples: bootstrap resamples.
        seed: seeds the resampling (the same inputs give the same interval).

    Returns:
        ``(low, high)``.
    """
    arrays = [np.asarray(sample, dtype=np.float64).ravel() for sample in samples]
    if not arrays or any(array.size == 0 for array in arrays):
        raise ValueError(f"every stratum needs at least one value, got sizes {[array.size for array in arrays]}")
    varying = [index for index, array in enumerate(arrays) if array.size >= 2]
    if not varying:
        return math.nan, math.nan
    fixed = {index: array for index, array in enumerate(arrays) if array.size < 2}

    def full_statistic(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        parts: list[np.ndarray] = []
        iterator = iter(resampled)
        batch_shape = resampled[0].shape[:-1]
        for index in range(len(arrays)):
            if index in fixed:
                parts.append(np.broadcast_to(fixed[index], (*batch_shape, fixed[index].size)))
            else:
                parts.append(next(iterator))
        return statistic(*parts, axis=-1)

    result = _bootstrap(
        tuple(arrays[index] for index in varying),
        full_statistic,
        seed,
        n_resamples=resamples,
        confidence_level=confidence,
        paired=False,
        axis=-1,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def pointwise_bootstrap_band(
    curves: np.ndarray, confidence: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean curve at every point, resampling runs (rows).

    Args:
        curves: ``(runs, points)``, e.g. cumulative regret of each seed at some rounds.
        confidence: the confidence level.
        resamples: bootstrap resamples.
        seed: seeds the resampling.

    Returns:
        ``(low, high)``, each ``(points,)``; both equal the mean curve when there is one run.
    """
    curves = np.asarray(curves, dtype=np.float64)
    if curves.ndim != 2 or curves.shape[0] == 0:
        raise ValueError(f"curves must have shape (runs, points) with runs >= 1, got {curves.shape}")
    if curves.shape[0] < 2:
        return curves[0].copy(), curves[0].copy()
    result = _bootstrap((curves,), np.mean, seed, n_resamples=resamples, confidence_level=confidence, axis=0)
    mean = curves.mean(axis=0)
    # Constant columns give NaN bounds in SciPy; their interval is the point itself.
    low = np.where(np.isnan(result.confidence_interval.low), mean, result.confidence_interval.low)
    high = np.where(np.isnan(result.confidence_interval.high), mean, result.confidence_interval.high)
    return low, high


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """``P(X < Y) + P(X = Y) / 2`` over all pairs: how often a run of X has lower regret than one of Y.

    This is the Mann-Whitney U statistic of X against Y divided by ``len(x) * len(y)``; 0.5 means
    no difference, 1 means every run of X beats every run of Y.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.size == 0 or y.size == 0:
        raise ValueError(f"both samples need at least one value, got sizes {x.size} and {y.size}")
    less = (x[:, None] < y[None, :]).sum()
    ties = (x[:, None] == y[None, :]).sum()
    return float((less + 0.5 * ties) / (x.size * y.size))


def growth_exponent(cumulative_regret: np.ndarray, start_fraction: float = 0.5) -> float:
    """Slope of ``log R(t)`` against ``log t`` over rounds ``t >= start_fraction * T`` (least squares).

    About 1 for linear regret, 0.5 for ``sqrt(T)`` regret, near 0 once regret stops growing.
    Rounds with ``R(t) <= 0`` are left out (no logarithm); fewer than two usable rounds give NaN.

    Args:
        cumulative_regret: ``(T,)``, ``R(t)`` for ``t = 1 .. T``.
        start_fraction: where the fitting window starts, as a fraction of T (default: the second
            half, where the asymptotic rate shows).
    """
    curve = np.asarray(cumulative_regret, dtype=np.float64).ravel()
    if not 0.0 <= start_fraction < 1.0:
        raise ValueError(f"start_fraction must lie in [0, 1), got {start_fraction!r}")
    rounds = np.arange(1, curve.size + 1, dtype=np.float64)
    window = (rounds >= start_fraction * curve.size) & (curve > 0)
    if window.sum() < 2:
        return math.nan
    slope, _ = np.polyfit(np.log(rounds[window]), np.log(curve[window]), 1)
    return float(slope)


def bound_shape(rounds: np.ndarray, exponent: float) -> np.ndarray:
    """``t^a (log t)^(1 - a)``, the shape of the paper's bounds, at each t in ``rounds`` ``(P,)``; returns ``(P,)``.

    ``log t`` is floored at ``log 2`` so that the shape is positive from t = 1.
    """
    t = np.asarray(rounds, dtype=np.float64)
    return t**exponent * np.log(np.maximum(t, 2.0)) ** (1.0 - exponent)


def loglog_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of ``log y`` against ``log x`` along the last axis, leaving out points with ``y <= 0``.

    Args:
        x: ``(P,)`` positive abscissae (rounds or horizons).
        y: ``(..., P)`` values; each row is fitted on its own points with ``y > 0``.

    Returns:
        ``(...)`` slopes; NaN where a row has fewer than two usable points.
    """
    log_x = np.log(np.asarray(x, dtype=np.float64))  # (P,)
    values = np.asarray(y, dtype=np.float64)
    usable = values > 0  # (..., P)
    log_y = np.log(np.where(usable, values, 1.0))  # (..., P)
    weights = usable.astype(np.float64)
    count = weights.sum(axis=-1)  # (...)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_x = (weights * log_x).sum(axis=-1) / count
        mean_y = (weights * log_y).sum(axis=-1) / count
        centred_x = log_x - mean_x[..., None]  # (..., P)
        covariance = (weights * centred_x * (log_y - mean_y[..., None])).sum(axis=-1)
        variance = (weights * centred_x**2).sum(axis=-1)
        slopes = covariance / variance
    return np.where((count >= 2) & (variance > 0), slopes, np.nan)


# Points of the fitting window a bootstrap resample fits (evenly spaced); bounds its memory at T = 10^5.
_WINDOW_POINTS = 200


def growth_exponent_interval(
    cumulative_regret: np.ndarray,
    start_fraction: float = 0.5,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`growth_exponent` of the mean curve, resampling the runs (seeds).

    Args:
        cumulative_regret: ``(runs, T)``, ``R(t)`` of each run for ``t = 1 .. T``.
        start_fraction: where the fitting window starts, as a fraction of T.
        confidence: the confidence level.
        resamples: bootstrap resamples.
        seed: seeds the resampling.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two runs.
    """
    curves = np.asarray(cumulative_regret, dtype=np.float64)
    if curves.ndim != 2 or curves.shape[0] == 0:
        raise ValueError(f"cumulative_regret must have shape (runs, T) with runs >= 1, got {curves.shape}")
    total = curves.shape[1]
    first = min(total - 1, int(math.ceil(start_fraction * total)) - 1)
    index = np.unique(np.linspace(max(first, 0), total - 1, _WINDOW_POINTS).round().astype(int))  # (P,)
    window = curves[:, index]  # (runs, P)

    def slope_of_mean(runs: np.ndarray, axis: int = -1) -> np.ndarray:
        mean_curve = window[runs.astype(int)].mean(axis=-2)  # (..., P)
        return loglog_slopes(index + 1.0, mean_curve)

    return stratified_bootstrap_ci(
        [np.arange(curves.shape[0])], slope_of_mean, confidence=confidence, resamples=resamples, seed=seed
    )


def horizon_exponent_interval(
    horizons: np.ndarray,
    finals: Sequence[np.ndarray],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Stratified bootstrap CI of the slope of ``log mean R(T)`` against ``log T`` (seeds resampled per horizon).

    Args:
        horizons: ``(H,)`` the horizons T.
        finals: H arrays, the final regret R(T) of each run (seed) at each horizon.
        confidence: the confidence level.
        resamples: bootstrap resamples.
        seed: seeds the resampling.

    Returns:
        ``(low, high)``; ``(nan, nan)`` where no horizon has two runs.
    """
    horizons = np.asarray(horizons, dtype=np.float64)
    if horizons.ndim != 1 or horizons.size != len(finals):
        raise ValueError(f"need one array of final regrets per horizon, got {len(finals)} for {horizons.size}")

    def slope_of_means(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        means = np.stack([sample.mean(axis=-1) for sample in samples], axis=-1)  # (..., H)
        return loglog_slopes(horizons, means)

    return stratified_bootstrap_ci(finals, slope_of_means, confidence=confidence, resamples=resamples, seed=seed)


def paired_interval(first: np.ndarray, second: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``first - second`` over paired seeds and its Student-t interval: ``(mean, low, high)``.

    Runs of two agents on one seed share its queries and noise (common random numbers), so their difference per
    seed is the unit: the interval is ``mean +- t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n)`` of the ``n``
    per-seed differences (NaN bounds with one seed).

    Args:
        first: ``(n,)`` one agent's statistic per seed (e.g. final cumulative regret).
        second: ``(n,)`` the other's, in the same seed order.
        confidence: the interval's level, in (0, 1).

    Raises:
        ValueError: shapes that differ or are not ``(n,)`` with n >= 1, or a level outside (0, 1).
    """
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"paired samples must both have shape (n,), n >= 1, got {first.shape} and {second.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    differences = first - second
    mean = float(differences.mean())
    if differences.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, differences.size - 1) * differences.std(ddof=1))
    half /= math.sqrt(differences.size)
    return mean, mean - half, mean + half


def quarter_rates(cumulative_regret: np.ndarray) -> np.ndarray:
    """Regret per round in each quarter of the rounds ``(..., 4)`` from cumulative regret ``(..., T)`` (T >= 4).

    Quarter q covers rounds ``(q T / 4, (q + 1) T / 4]`` (integer bounds); its rate is its regret over its rounds.

    Raises:
        ValueError: fewer than 4 rounds.
    """
    cumulative = np.asarray(cumulative_regret, dtype=np.float64)
    rounds = cumulative.shape[-1]
    if rounds < 4:
        raise ValueError(f"quarter_rates needs at least 4 rounds, got {rounds}")
    bounds = [rounds * quarter // 4 for quarter in range(5)]  # 0, T/4, T/2, 3T/4, T
    padded = np.concatenate([np.zeros((*cumulative.shape[:-1], 1)), cumulative], axis=-1)  # (..., T + 1)
    ends = padded[..., bounds]  # (..., 5)
    return np.diff(ends, axis=-1) / np.diff(bounds)
