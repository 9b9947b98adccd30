"""LinearConfidence: Sherman-Morrison/Woodbury inverse, beta_t, UCB scores, ellipsoid coverage."""

import math

import numpy as np
import pytest
import torch

from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence, confidence_radius, masked_argmax


def random_unit_rows(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    """Rows with norm at most 1 (uniform direction, uniform radius)."""
    x = rng.standard_normal((rows, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(0.0, 1.0, (rows, 1))


def test_sherman_morrison_inverse_matches_linalg_inv_after_10000_updates():
    rng = np.random.default_rng(0)
    dim = 12
    confidence = LinearConfidence(dim, max_length=4, refactor_every=10**9)
    for y, r in zip(random_unit_rows(rng, 10_000, dim), rng.standard_normal(10_000), strict=True):
        confidence.update(y, r)
    assert confidence.rounds == 10_000
    exact = torch.linalg.inv(confidence.design)
    assert torch.allclose(confidence.design_inverse, exact, rtol=0.0, atol=1e-8)
    assert torch.allclose(confidence.theta_hat, exact @ confidence.response_sum, rtol=0.0, atol=1e-8)


def test_design_and_theta_hat_are_the_ridge_solution():
    rng = np.random.default_rng(1)
    dim, rounds, lambda_ = 5, 40, 0.7
    features, rewards = random_unit_rows(rng, rounds, dim), rng.standard_normal(rounds)
    confidence = LinearConfidence(dim, max_length=3, lambda_=lambda_)
    for y, r in zip(features, rewards, strict=True):
        confidence.update(y, r)
    design = lambda_ * np.eye(dim) + features.T @ features
    ridge = np.linalg.solve(design, features.T @ rewards)
    np.testing.assert_allclose(confidence.design.numpy(), design, atol=1e-12)
    np.testing.assert_allclose(confidence.theta_hat.numpy(), ridge, atol=1e-10)


@pytest.mark.parametrize("batch", [2, 7, 32])
def test_batched_woodbury_update_equals_sequential_rank_one_updates(batch):
    rng = np.random.default_rng(batch)
    dim = 9
    features, rewards = random_unit_rows(rng, 4 * batch, dim), rng.standard_normal(4 * batch)
    sequential = LinearConfidence(dim, max_length=2, refactor_every=10**9)
    batched = LinearConfidence(dim, max_length=2, refactor_every=10**9)
    for y, r in zip(features, rewards, strict=True):
        sequential.update(y, r)
    for start in range(0, 4 * batch, batch):
        batched.update(features[start : start + batch], rewards[start : start + batch])
    assert batched.rounds == sequential.rounds == 4 * batch
    assert torch.allclose(batched.design_inverse, sequential.design_inverse, rtol=0.0, atol=1e-12)
    assert torch.allclose(batched.theta_hat, sequential.theta_hat, rtol=0.0, atol=1e-12)


def test_refactorisation_replaces_the_inverse_by_the_exact_one():
    rng = np.random.default_rng(2)
    confidence = LinearConfidence(6, max_length=2, refactor_every=50)
    for y, r in zip(random_unit_rows(rng, 50, 6), rng.standard_normal(50), strict=True):
        confidence.update(y, r)
    exact = torch.cholesky_inverse(torch.linalg.cholesky(confidence.design))
    assert torch.equal(confidence.design_inverse, exact)


@pytest.mark.parametrize(
    ("t", "d", "length", "sigma", "delta"),
    [(1, 16, 8, 0.1, 0.05), (7, 3, 1, 1.0, 0.5), (1000, 64, 30, 0.25, 1e-3), (12345, 1, 2, 2.0, 0.9)],
)
def test_beta_t_is_the_papers_formula(t, d, length, sigma, delta):
    expected = sigma * sigma * (2 + 4 * d * math.log(1 + t * length / d) + 8 * math.log(4 / delta))
    assert confidence_radius(t, d, length, sigma, delta) == pytest.approx(expected, rel=1e-14)
    confidence = LinearConfidence(d, length, sigma=sigma, delta=delta)
    confidence.rounds = t - 1
    assert confidence.beta() == pytest.approx(expected, rel=1e-14)


def test_round_one_confidence_set_is_the_origin():
    confidence = LinearConfidence(4, max_length=3)
    scores = confidence.ucb(torch.randn(5, 4, dtype=torch.float64))
    assert torch.equal(scores, torch.zeros(5, dtype=torch.float64))
    confidence.update(np.ones(4) / 2, 1.0)
    assert confidence.radius() == pytest.approx(math.sqrt(confidence_radius(2, 4, 3, 0.1, 0.05)))


def test_ucb_is_the_maximum_of_the_linear_function_over_the_ellipsoid():
    rng = np.random.default_rng(3)
    dim = 4
    confidence = LinearConfidence(dim, max_length=2, sigma=0.3)
    for y, r in zip(random_unit_rows(rng, 30, dim), rng.standard_normal(30), strict=True):
        confidence.update(y, r)
    beta = confidence.beta()
    design = confidence.design.numpy()
    theta_hat = confidence.theta_hat.numpy()
    # Sample points of the ellipsoid boundary: none beats the UCB, and the UCB is attained.
    directions = rng.standard_normal((20_000, dim))
    chol = np.linalg.cholesky(np.linalg.inv(design))
    boundary = theta_hat + math.sqrt(beta) * (directions / np.linalg.norm(directions, axis=1, keepdims=True)) @ chol.T
    for e in random_unit_rows(rng, 5, dim):
        ucb = float(confidence.ucb(e))
        assert (boundary @ e).max() <= ucb + 1e-12
        assert (boundary @ e).max() >= ucb - 0.05 * math.sqrt(beta)
        maximiser = theta_hat + math.sqrt(beta) * np.linalg.solve(design, e) / math.sqrt(e @ np.linalg.solve(design, e))
        assert maximiser @ e == pytest.approx(ucb, abs=1e-12)


def test_ucb_of_a_batch_equals_row_by_row_scores():
    rng = np.random.default_rng(4)
    confidence = LinearConfidence(6, max_length=3)
    for y, r in zip(random_unit_rows(rng, 10, 6), rng.standard_normal(10), strict=True):
        confidence.update(y, r)
    batch = torch.as_tensor(rng.standard_normal((3, 5, 6)))
    scores = confidence.ucb(batch, scale=0.5)
    assert scores.shape == (3, 5)
    for b in range(3):
        for j in range(5):
            assert float(scores[b, j]) == pytest.approx(float(confidence.ucb(batch[b, j], scale=0.5)), abs=1e-12)


def test_ellipsoid_contains_true_theta_in_at_least_one_minus_delta_of_runs():
    # Linear bandit data simulated directly: ||theta|| <= sigma and lambda = 1 so that
    # (sqrt(lambda)||theta|| + ...)^2 <= 2 sigma^2 + ... as the paper's beta_t uses.
    dim, rounds, runs, delta, sigma = 4, 150, 40, 0.1, 0.5
    covered = 0
    shrunk_covered = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        theta = rng.standard_normal(dim)
        theta *= 0.5 / np.linalg.norm(theta)
        confidence = LinearConfidence(dim, max_length=1, sigma=sigma, delta=delta)
        inside = shrunk_inside = True
        for y in random_unit_rows(rng, rounds, dim):
            confidence.update(y, y @ theta + sigma * rng.standard_normal())
            inside &= confidence.contains(torch.as_tensor(theta))
            shrunk_inside &= confidence.contains(torch.as_tensor(theta), beta=1e-3 * confidence.beta())
        covered += inside
        shrunk_covered += shrunk_inside
    assert covered >= (1 - delta) * runs
    # The check has power: a radius far too small leaves theta outside in most runs.
    assert shrunk_covered <= runs // 2


@pytest.mark.parametrize(
    "kwargs",
    [{"lambda_": 0.0}, {"lambda_": -1.0}, {"delta": 0.0}, {"delta": 1.0}, {"sigma": -0.1}, {"refactor_every": 0}],
)
def test_invalid_arguments_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        LinearConfidence(4, max_length=2, **kwargs)


def test_update_rejects_bad_shapes_and_non_finite_values():
    confidence = LinearConfidence(3, max_length=2)
    with pytest.raises(ValueError):
        confidence.update(np.ones(4), 1.0)
    with pytest.raises(ValueError):
        confidence.update(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError):
        confidence.update(np.array([1.0, np.nan, 0.0]), 1.0)


def test_masked_argmax_takes_the_first_best_allowed_candidate_in_numpy_and_torch() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 3, size=(200, 6)).astype(np.float64)  # many ties
    mask = rng.random((200, 6)) < 0.6
    mask[:, 5] = True  # every row allows something
    best = [row_mask & (row == row[row_mask].max()) for row, row_mask in zip(scores, mask, strict=True)]
    expected = [int(np.flatnonzero(row)[0]) for row in best]
    np.testing.assert_array_equal(masked_argmax(scores, mask), expected)
    np.testing.assert_array_equal(masked_argmax(torch.from_numpy(scores), torch.from_numpy(mask)).numpy(), expected)
    assert int(masked_argmax(scores[0], mask[0])) == expected[0]
