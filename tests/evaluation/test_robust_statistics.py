"""Statistics against hand computations on small arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenized_bandit_gym.evaluation.robust_statistics import (
    growth_exponent,
    iqm,
    pointwise_bootstrap_band,
    pooled_iqm,
    pooled_mean,
    probability_of_improvement,
    stratified_bootstrap_ci,
)


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    # sorted: -50, 1, 2, 3, 4, 5, 6, 100; the lowest 2 and highest 2 are cut, leaving 2, 3, 4, 5.
    assert iqm(np.array([100.0, 1.0, 3.0, 4.0, 5.0, 6.0, 2.0, -50.0])) == pytest.approx(3.5)
    assert iqm(np.array([2.0, 2.0, 2.0, 2.0])) == pytest.approx(2.0)


def test_pooled_statistics_concatenate_strata() -> None:
    assert pooled_mean(np.array([0.0, 1.0]), np.array([10.0])) == pytest.approx(11.0 / 3.0)
    assert pooled_iqm(np.array([1.0, 2.0, 3.0, 4.0]), np.array([5.0, 6.0, 7.0, 8.0])) == pytest.approx(4.5)


def test_probability_of_improvement_counts_pairs_and_half_ties() -> None:
    x = np.array([1.0, 3.0])
    y = np.array([2.0, 3.0, 4.0])
    # pairs with x < y: (1,2) (1,3) (1,4) (3,4) = 4; ties: (3,3) = 1; total 6 pairs.
    assert probability_of_improvement(x, y) == pytest.approx((4 + 0.5) / 6)
    assert probability_of_improvement(y, x) == pytest.approx((1 + 0.5) / 6)
    assert probability_of_improvement(x, y) + probability_of_improvement(y, x) == pytest.approx(1.0)
    assert probability_of_improvement(np.ones(3), np.ones(2)) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one"):
        probability_of_improvement(np.array([]), y)


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0 / 3.0])
def test_growth_exponent_recovers_power_laws(exponent: float) -> None:
    t = np.arange(1, 401, dtype=np.float64)
    assert growth_exponent(3.0 * t**exponent) == pytest.approx(exponent, abs=1e-9)


def test_growth_exponent_fits_only_the_window() -> None:
    t = np.arange(1, 101, dtype=np.float64)
    # linear in the first half, constant (exponent 0) in the second half
    curve = np.where(t <= 50, t, 50.0)
    assert growth_exponent(curve) == pytest.approx(0.0, abs=1e-12)
    assert growth_exponent(curve, start_fraction=0.0) > 0.2
    with pytest.raises(ValueError, match="start_fraction"):
        growth_exponent(curve, start_fraction=1.0)


def test_growth_exponent_skips_nonpositive_regret() -> None:
    assert math.isnan(growth_exponent(np.zeros(50)))
    curve = np.array([0.0, 0.0, -1e-16, 4.0, 8.0])  # window t >= 2.5: t = 3 (skipped), 4, 5
    expected = (math.log(8.0) - math.log(4.0)) / (math.log(5.0) - math.log(4.0))
    assert growth_exponent(curve) == pytest.approx(expected)


def test_stratified_bootstrap_matches_the_exact_resampling_distribution() -> None:
    # Stratum x = [0, 1] resamples to sums 0, 1, 2 with probabilities 1/4, 1/2, 1/4; y = [10] stays.
    # Pooled mean = (sum + 10) / 3 takes 10/3, 11/3, 4: the 95% percentile CI is (10/3, 4).
    low, high = stratified_bootstrap_ci([np.array([0.0, 1.0]), np.array([10.0])], pooled_mean, resamples=4000)
    assert low == pytest.approx(10.0 / 3.0)
    assert high == pytest.approx(4.0)


def test_stratified_bootstrap_never_mixes_strata() -> None:
    # Within each stratum every value is equal, so every stratified resample has the same pooled mean;
    # an unstratified bootstrap of [0, 0, 1, 1] would spread.
    low, high = stratified_bootstrap_ci([np.zeros(2), np.ones(2)], pooled_mean)
    assert low == pytest.approx(0.5) and high == pytest.approx(0.5)


def test_bootstrap_ci_is_seeded_and_covers_the_mean() -> None:
    rng = np.random.default_rng(0)
    samples = [rng.normal(5.0, 1.0, size=10), rng.normal(-2.0, 3.0, size=8)]
    first = stratified_bootstrap_ci(samples, pooled_mean, seed=3)
    assert first == stratified_bootstrap_ci(samples, pooled_mean, seed=3)
    assert first[0] < pooled_mean(*samples) < first[1]


def test_bootstrap_ci_undefined_with_one_value_per_stratum() -> None:
    low, high = stratified_bootstrap_ci([np.array([1.0]), np.array([2.0])])
    assert math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="at least one value"):
        stratified_bootstrap_ci([np.array([])])


def test_pointwise_band_brackets_the_mean_curve() -> None:
    curves = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 2.0, 9.0]])
    low, high = pointwise_bootstrap_band(curves)
    mean = curves.mean(axis=0)
    assert np.all(low <= mean + 1e-12) and np.all(mean <= high + 1e-12)
    assert low[0] == high[0] == 0.0
    # the bootstrap mean of 3 values lies between their min and max
    assert np.all(low >= curves.min(axis=0) - 1e-12) and np.all(high <= curves.max(axis=0) + 1e-12)
    single_low, single_high = pointwise_bootstrap_band(curves[:1])
    assert np.array_equal(single_low, curves[0]) and np.array_equal(single_high, curves[0])
