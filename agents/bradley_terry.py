"""The Bradley-Terry (logistic) maximum-likelihood fit the pairwise agents share.

A comparison of two responses with features ``e1`` and ``e2`` is a label ``y`` (1 when the first
is preferred) of a logistic model on their difference ``z = e1 - e2``::

    P(y = 1) = sigma(<theta, z>)

and the regularised maximum-likelihood estimate over the comparisons seen so far is::

    theta_hat = argmin_theta  sum_i -[y_i log sigma(<theta, z_i>) + (1 - y_i) log(1 - sigma(<theta, z_i>))]
                              + (lambda / 2) ||theta||^2

(the estimate of the contextual dueling bandits MaxInP, Saha 2021, and CoLSTIM, Bengs et al. 2022;
T-POP's pairwise loss ``binary_cross_entropy_with_logits(s1 - s2, label)`` with a linear head and
weight decay). It is strictly convex for ``lambda > 0``; :class:`BradleyTerryFit` solves it by
Newton's method (with backtracking), warm-started from the previous round's estimate, to a step below
``tolerance``.
An environment's preference temperature tau only rescales theta (``theta / tau``), so the fit
recovers theta's direction, which is what greedy decoding needs.
"""

from __future__ import annotations

import numpy as np

from tokenized_bandit_gym.core.validation import check_int, check_real


def log_sigmoid(values: np.ndarray) -> np.ndarray:
    """``log sigma(values)`` without overflow, elementwise."""
    return -np.logaddexp(0.0, -values)


class BradleyTerryFit:
    """The comparisons seen so far and their regularised logistic MLE ``theta_hat`` (module docstring).

    Args:
        dim: d, the feature width.
        lambda_: the ridge weight lambda > 0 (the Hessian's floor: the problem stays strictly convex).
        capacity: comparisons to preallocate for (the buffer doubles past it).
        tolerance: Newton stops when the step's norm falls below it.
        max_iterations: Newton steps per fit at most.

    Attributes:
        theta_hat: ``(d,)`` the current estimate (zeros before the first comparison).
        count: comparisons stored.
    """

    def __init__(
        self,
        dim: int,
        lambda_: float = 1.0,
        capacity: int = 1024,
        tolerance: float = 1e-9,
        max_iterations: int = 50,
    ) -> None:
        self.dim = check_int("dim", dim, minimum=1)
        self.lambda_ = check_real("lambda_", lambda_, low=0.0)
        if self.lambda_ <= 0.0:
            raise ValueError(f"lambda_ must be positive (the fit must be strictly convex), got {lambda_!r}")
        self.tolerance = check_real("tolerance", tolerance, low=0.0)
        self.max_iterations = check_int("max_iterations", max_iterations, minimum=1)
        self._differences = np.empty((check_int("capacity", capacity, minimum=1), self.dim))  # (capacity, d)
        self._labels = np.empty(self._differences.shape[0])  # (capacity,)
        self.count = 0
        self.theta_hat = np.zeros(self.dim)  # (d,)

    @property
    def differences(self) -> np.ndarray:
        """``(count, d)`` the stored ``z_i = e1_i - e2_i`` (a view)."""
        return self._differences[: self.count]

    @property
    def labels(self) -> np.ndarray:
        """``(count,)`` the stored labels (1.0: the first preferred)."""
        return self._labels[: self.count]

    def add(self, difference: np.ndarray, label: float) -> None:
        """Store one comparison: ``difference`` ``(d,)`` = e1 - e2 and ``label`` in {0, 1}.

        Raises:
            ValueError: wrong shape, a non-finite difference or a label outside {0, 1}.
        """
        z = np.asarray(difference, dtype=np.float64).reshape(-1)
        if z.shape != (self.dim,):
            raise ValueError(f"difference must have shape ({self.dim},), got {np.shape(difference)}")
        if not np.isfinite(z).all():
            raise ValueError("difference must be finite")
        if label not in (0.0, 1.0):
            raise ValueError(f"label must be 0 or 1 (1: the first response preferred), got {label!r}")
        if self.count == self._differences.shape[0]:
            self._differences = np.concatenate([self._differences, np.empty_like(self._differences)])
            self._labels = np.concatenate([self._labels, np.empty_like(self._labels)])
        self._differences[self.count] = z
        self._labels[self.count] = label
        self.count += 1

    def negative_log_likelihood(self, theta: np.ndarray) -> float:
        """The regularised objective at ``theta`` ``(d,)`` (what :meth:`fit` minimises)."""
        margins = self.differences @ theta  # (count,)
        labels = self.labels
        likelihood = labels * log_sigmoid(margins) + (1.0 - labels) * log_sigmoid(-margins)
        return float(-likelihood.sum() + 0.5 * self.lambda_ * theta @ theta)

    def fit(self) -> np.ndarray:
        """Newton's method from the current ``theta_hat``; returns (and keeps) the new ``(d,)`` estimate."""
        z, labels, theta = self.differences, self.labels, self.theta_hat.copy()
        identity = np.eye(self.dim)
        objective = self.negative_log_likelihood(theta)
        for _ in range(self.max_iterations):
            probabilities = np.exp(log_sigmoid(z @ theta))  # (count,)
            gradient = z.T @ (probabilities - labels) + self.lambda_ * theta  # (d,)
            curvature = probabilities * (1.0 - probabilities)  # (count,)
            hessian = (z * curvature[:, None]).T @ z + self.lambda_ * identity  # (d, d)
            step = np.linalg.solve(hessian, gradient)  # (d,)
            for _ in range(30):  # backtracking: a full Newton step can overshoot far from the optimum
                candidate = theta - step
                candidate_objective = self.negative_log_likelihood(candidate)
                if candidate_objective <= objective:
                    break
                step = step / 2.0
            theta, objective = candidate, candidate_objective
            if float(np.linalg.norm(step)) < self.tolerance:
                break
        self.theta_hat = theta
        return theta
