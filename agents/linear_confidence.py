"""Ridge regression with rank-one updates and the confidence ellipsoid of EOFUL (paper section 3.2).

The one linear-algebra module every linear agent shares (EOFUL, k-Lookahead-EOFUL, TokenizedLinTS).
Notation of the paper, with the round index made explicit::

    Sigma_t     = lambda I + sum_{i < t} y_i y_i^T                    (Sigma_1 = lambda I)
    theta_hat_t = Sigma_t^-1 sum_{i < t} r_i y_i                      (eq. update-theta)
    C_t         = {v : (v - theta_hat_t)^T Sigma_t (v - theta_hat_t) <= beta_t}   (eq. update-c)
    beta_t      = sigma^2 (2 + 4 d log(1 + t L / d) + 8 log(4 / delta))

where ``y_i`` is the embedding ``e(x_i, y_i)`` of the response submitted in round i and ``r_i``
its reward. (The paper writes ``Sigma_t = Sigma_{t-1} + y_t y_t^T``; its eq. update-theta sums
rewards up to ``t - 1`` and calls theta_hat "the solution of the ridge regression", so the matrix
used in round t holds the responses of rounds ``1 .. t-1``, as above.)

The maximum of ``<v, e>`` over ``v`` in ``C_t`` is the UCB score
``<theta_hat_t, e> + sqrt(beta_t) ||e||_{Sigma_t^-1}`` with ``||e||_A = sqrt(e^T A e)``.
``Sigma_t^-1`` is kept by Sherman-Morrison rank-one updates (Woodbury for a batch of rounds) in
float64 and refactorised exactly (Cholesky of ``Sigma_t``, which is kept too) every
``refactor_every`` updated rounds, so rounding errors cannot drift.

On the CPU the per-step scoring (:meth:`LinearConfidence.ucb_host`) and the one-round update
run in NumPy on the tensors' shared memory, at every d: a torch call on a ``(16, 16)`` tensor
costs several microseconds of dispatch, the NumPy call a fraction of it, and at large d both
libraries spend their time in the same BLAS products (so no size threshold makes the cost jump).
On a GPU everything stays in torch. The two paths compute the same formulas; their matrix
products may round differently in the last bit (NumPy's and torch's BLAS kernels sum in
different orders), so the tests hold them to 1e-12 and to identical decisions.
"""

from __future__ import annotations

import math
from typing import Protocol, cast

import numpy as np
import torch

from tokenized_bandit_gym.core.validation import check_int, check_real


def runs_on_host(device: torch.device) -> bool:
    """Whether a confidence set on ``device`` runs its per-step linear algebra in NumPy (the CPU, at any d)."""
    return device.type == "cpu"


def masked_argmax(scores: np.ndarray | torch.Tensor, mask: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """The index of the highest score among the allowed candidates, lowest index on ties.

    NumPy or torch alike (``-inf`` off the mask, then the first maximum, as both libraries take it).

    Args:
        scores: ``(..., k)`` the candidates' scores (finite).
        mask: ``(..., k)`` bool, the allowed candidates (NumPy: any numeric mask, nonzero allowed, as
            an observation's int8 ``action_mask``, which ``np.where`` takes as it is: no ``astype`` copy).

    Returns:
        ``(...)`` int64 indices (a row with no allowed candidate gets 0: the caller checks).
    """
    if isinstance(scores, np.ndarray):
        return np.where(mask, scores, -np.inf).argmax(axis=-1)
    return scores.masked_fill(~cast(torch.Tensor, mask), float("-inf")).argmax(dim=-1)


def confidence_radius(round_index: int, dim: int, max_length: int, sigma: float, delta: float) -> float:
    """``beta_t = sigma^2 (2 + 4 d log(1 + t L / d) + 8 log(4 / delta))`` (paper section 3.2).

    Args:
        round_index: t >= 1, the round the confidence set is used in.
        dim: d, the embedding dimension.
        max_length: L, the longest response.
        sigma: the noise scale (sub-Gaussian parameter or bound of |eta|).
        delta: the failure probability in (0, 1).

    Returns:
        beta_t (the squared radius of C_t).
    """
    t = check_int("round_index", round_index, minimum=1)
    d = check_int("dim", dim, minimum=1)
    length = check_int("max_length", max_length, minimum=1)
    sigma = check_real("sigma", sigma, low=0.0)
    delta = check_real("delta", delta, low=0.0, high=1.0)
    if delta in (0.0, 1.0):
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r}")
    return _beta(t, d, length, sigma, 8.0 * math.log(4.0 / delta))


def _beta(t: int, d: int, length: int, sigma: float, log_term: float) -> float:
    """The formula of :func:`confidence_radius` on checked arguments, with ``log_term = 8 log(4 / delta)``."""
    return sigma**2 * (2.0 + 4.0 * d * math.log(1.0 + t * length / d) + log_term)


class RidgeSettings(Protocol):
    """A linear agent's settings of its confidence set (EOFUL's, k-Lookahead-EOFUL's, TokenizedLinTS's)."""

    lambda_: float
    sigma: float
    delta: float
    refactor_every: int


RIDGE_SETTINGS = ("lambda_", "sigma", "delta", "refactor_every")
"""The :class:`RidgeSettings` attributes, :class:`LinearConfidence`'s keywords of the same names."""


def check_ridge_arguments(
    lambda_: float, delta: float, sigma: float, refactor_every: int
) -> tuple[float, float, float, int]:
    """A linear agent's ``(lambda_, delta, sigma, refactor_every)``, checked as its constructor takes them.

    ``lambda_ > 0`` and ``delta`` strictly inside ``(0, 1)`` are checked when :class:`LinearConfidence` is built.

    Raises:
        ValueError: ``lambda_`` or ``sigma`` negative, ``delta`` outside ``[0, 1]``, ``refactor_every`` below 1.
        TypeError: a value that is not a number (an integer for ``refactor_every``).
    """
    return (
        check_real("lambda_", lambda_, low=0.0),
        check_real("delta", delta, low=0.0, high=1.0),
        check_real("sigma", sigma, low=0.0),
        check_int("refactor_every", refactor_every, minimum=1),
    )


def agent_confidence(
    settings: RidgeSettings, dim: int, max_length: int, device: torch.device | str = "cpu"
) -> LinearConfidence:
    """A fresh :class:`LinearConfidence` of ``dim`` features and length ``max_length`` with ``settings``."""
    ridge = {name: getattr(settings, name) for name in RIDGE_SETTINGS}
    return LinearConfidence(dim, max_length, device=device, **ridge)


class LinearConfidence:
    """Ridge estimate ``theta_hat_t``, ``Sigma_t`` and ``Sigma_t^-1`` with rank-one updates.

    Args:
        dim: d, the feature dimension.
        max_length: L, used by ``beta_t``.
        lambda_: the ridge parameter (``Sigma_1 = lambda I``), > 0.
        sigma: the noise scale in ``beta_t`` (>= 0).
        delta: the failure probability in ``beta_t``, in (0, 1).
        refactor_every: recompute ``Sigma^-1`` exactly from ``Sigma`` after this many updated
            rounds (>= 1); rank-one updates in between.
        device: torch device of every tensor.
        dtype: floating dtype (float64 by default; the rank-one updates need it).

    On the host (:attr:`on_host`) a one-round update writes into the tensors below in place
    (their NumPy views), so a tensor read before an update changes with it: clone it to keep it.

    Attributes:
        rounds: the number of rounds learned from (t - 1 for the set used in round t).
        design: ``(d, d)`` ``Sigma_t``.
        design_inverse: ``(d, d)`` ``Sigma_t^-1``.
        response_sum: ``(d,)`` ``sum_{i < t} r_i y_i``.
        theta_hat: ``(d,)`` ``theta_hat_t``.
    """

    def __init__(
        self,
        dim: int,
        max_length: int,
        lambda_: float = 1.0,
        sigma: float = 0.1,
        delta: float = 0.05,
        refactor_every: int = 1000,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.dim = check_int("dim", dim, minimum=1)
        self.max_length = check_int("max_length", max_length, minimum=1)
        self.lambda_ = check_real("lambda_", lambda_, low=0.0)
        if self.lambda_ == 0.0:
            raise ValueError(f"lambda_ must be > 0 (Sigma_1 = lambda I must be invertible), got {lambda_!r}")
        self.sigma = check_real("sigma", sigma, low=0.0)
        self.delta = check_real("delta", delta, low=0.0, high=1.0)
        if self.delta in (0.0, 1.0):
            raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r}")
        self.refactor_every = check_int("refactor_every", refactor_every, minimum=1)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.device = torch.device(device)
        self.dtype = dtype
        self._log_term = 8.0 * math.log(4.0 / self.delta)  # of beta_t
        self.on_host = runs_on_host(self.device)
        self._numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        self._float64 = self._numpy_dtype == np.float64  # a Python float is learned from without a cast
        self.reset()

    def reset(self) -> None:
        """Forget all data: ``Sigma_1 = lambda I``, ``theta_hat_1 = 0``."""
        d = self.dim
        eye = torch.eye(d, device=self.device, dtype=self.dtype)  # (d, d)
        self.design = self.lambda_ * eye  # (d, d)
        self.design_inverse = eye / self.lambda_  # (d, d)
        self.response_sum = torch.zeros(d, device=self.device, dtype=self.dtype)  # (d,)
        self.theta_hat = torch.zeros(d, device=self.device, dtype=self.dtype)  # (d,)
        self.rounds = 0
        self._since_refactor = 0
        self._radius_cache: tuple[int, float, float] = (-1, 0.0, 0.0)  # (rounds, scale, radius)
        self._views_of: tuple[torch.Tensor, ...] | None = None  # the tensors _views were made of
        self._views: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = ()  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, object]:
        """The state to copy or pickle, without the NumPy views (a copy's views must be of its own tensors)."""
        state = self.__dict__.copy()
        state["_views_of"], state["_views"] = None, ()
        return state

    # ------------------------------------------------------------------ the confidence set
    @property
    def round_index(self) -> int:
        """t, the round the current set ``C_t`` is for (``rounds + 1``)."""
        return self.rounds + 1

    def beta(self, round_index: int | None = None) -> float:
        """``beta_t`` for ``round_index`` (default: the current round t)."""
        if round_index is None:  # the parameters were checked at construction: the formula alone, once a round
            return _beta(self.round_index, self.dim, self.max_length, self.sigma, self._log_term)
        return confidence_radius(round_index, self.dim, self.max_length, self.sigma, self.delta)

    def radius(self, scale: float = 1.0) -> float:
        """``scale * sqrt(beta_t)`` for the current round; 0 in round 1, where ``C_1 = {0}`` (paper)."""
        if self.rounds == 0:
            return 0.0
        rounds, cached_scale, radius = self._radius_cache
        if rounds != self.rounds or cached_scale != scale:
            radius = scale * math.sqrt(self.beta())
            self._radius_cache = (self.rounds, scale, radius)
        return radius

    def as_tensor(self, features: object) -> torch.Tensor:
        """``features`` as a tensor of this module's device and dtype (NumPy arrays accepted).

        Converted straight to :attr:`dtype`: a Python float never passes through torch's default
        float32 (which would round a reward to 7 digits before it is learned from).
        """
        if isinstance(features, torch.Tensor):
            return features.to(device=self.device, dtype=self.dtype)
        return torch.as_tensor(features, dtype=self.dtype, device=self.device)

    def mean(self, features: torch.Tensor) -> torch.Tensor:
        """``<theta_hat_t, e>`` for features ``(..., d)``; returns ``(...)``."""
        return self.as_tensor(features) @ self.theta_hat  # (...)

    def width(self, features: torch.Tensor) -> torch.Tensor:
        """``||e||_{Sigma_t^-1} = sqrt(e^T Sigma_t^-1 e)`` for features ``(..., d)``; returns ``(...)``."""
        e = self.as_tensor(features)  # (..., d)
        quadratic = ((e @ self.design_inverse) * e).sum(-1)  # (...)
        return quadratic.clamp_min(0.0).sqrt()

    def ucb(self, features: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """``max_{v in C_t} <v, e> = <theta_hat_t, e> + r ||e||_{Sigma_t^-1}``, ``r = scale sqrt(beta_t)``.

        One matrix product for every candidate: features ``(k, d)`` or ``(B, k, d)`` (any leading
        shape) give scores ``(k,)`` or ``(B, k)``.
        """
        e = self.as_tensor(features)  # (..., d)
        radius = self.radius(scale)
        if radius == 0.0:
            return e @ self.theta_hat  # (...)
        mean = e @ self.theta_hat  # (...)
        quadratic = ((e @ self.design_inverse) * e).sum(-1)  # (...) e^T Sigma^-1 e
        return mean + radius * quadratic.clamp_min(0.0).sqrt()

    def _host_views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """NumPy views ``(theta_hat, Sigma^-1, Sigma, b)`` of the CPU tensors, made again when one is replaced."""
        made_of = self._views_of
        if (
            made_of is None
            or made_of[0] is not self.theta_hat
            or made_of[1] is not self.design_inverse
            or made_of[2] is not self.design
            or made_of[3] is not self.response_sum
        ):
            tensors = (self.theta_hat, self.design_inverse, self.design, self.response_sum)
            self._views = tuple(tensor.numpy() for tensor in tensors)  # type: ignore[assignment]
            self._views_of = tensors
        return self._views

    def ucb_host(self, features: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """:meth:`ucb` in NumPy (for :attr:`on_host` sets): features ``(..., d)`` give scores ``(...)``."""
        theta_hat, inverse, _, _ = self._host_views()
        e = np.asarray(features, dtype=self._numpy_dtype)  # (..., d)
        mean = e @ theta_hat  # (...)
        radius = self.radius(scale)
        if radius == 0.0:
            return mean
        return mean + radius * np.sqrt(np.maximum(((e @ inverse) * e).sum(-1), 0.0))

    def ucb_and_width_host(self, features: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`ucb_host` and :meth:`width` from one product: ``(scores, ||e||_{Sigma^-1})``, each ``(...)``."""
        theta_hat, _, _, _ = self._host_views()
        e = np.asarray(features, dtype=self._numpy_dtype)  # (..., d)
        widths = self.width_host(e)  # (...)
        return e @ theta_hat + self.radius(scale) * widths, widths

    def width_host(self, features: np.ndarray) -> np.ndarray:
        """:meth:`width` in NumPy: ``||e||_{Sigma_t^-1}`` for features ``(..., d)``; returns ``(...)``."""
        _, inverse, _, _ = self._host_views()
        e = np.asarray(features, dtype=self._numpy_dtype)  # (..., d)
        return np.sqrt(np.maximum(((e @ inverse) * e).sum(-1), 0.0))

    def mahalanobis_host(self, features: np.ndarray) -> np.ndarray:
        """:meth:`mahalanobis` in NumPy: ``||e||_{Sigma_t}`` for features ``(..., d)``; returns ``(...)``."""
        _, _, design, _ = self._host_views()
        e = np.asarray(features, dtype=self._numpy_dtype)  # (..., d)
        return np.sqrt(np.maximum(((e @ design) * e).sum(-1), 0.0))

    def norms_host(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`mahalanobis` and :meth:`width` in NumPy: ``(||e||_Sigma, ||e||_{Sigma^-1})``, each ``(...)``."""
        e = np.asarray(features, dtype=self._numpy_dtype)  # (..., d)
        return self.mahalanobis_host(e), self.width_host(e)

    def mahalanobis(self, features: torch.Tensor) -> torch.Tensor:
        """``||e||_{Sigma_t} = sqrt(e^T Sigma_t e)`` (Assumption 4's norm) for ``(..., d)``; returns ``(...)``."""
        e = self.as_tensor(features)  # (..., d)
        return ((e @ self.design) * e).sum(-1).clamp_min(0.0).sqrt()

    def contains(self, theta: torch.Tensor, beta: float | None = None) -> bool:
        """Whether ``theta`` lies in ``C_t``: ``(theta - theta_hat)^T Sigma_t (theta - theta_hat) <= beta_t``."""
        difference = self.as_tensor(theta) - self.theta_hat  # (d,)
        bound = self.beta() if beta is None else beta
        return bool(difference @ self.design @ difference <= bound)

    # ------------------------------------------------------------------ learning
    def update(self, features: object, rewards: object) -> None:
        """Learn from B rounds at once: ``Sigma += Y^T Y``, ``b += Y^T r``, then ``theta_hat = Sigma^-1 b``.

        B = 1 is the Sherman-Morrison update ``Sigma^-1 - (Sigma^-1 y)(Sigma^-1 y)^T / (1 + y^T Sigma^-1 y)``;
        B > 1 is its Woodbury form with one ``(B, B)`` Cholesky solve. All B rounds count as
        decoded with the same confidence set (batched learning).

        Args:
            features: ``(d,)`` or ``(B, d)`` embeddings of the submitted responses.
            rewards: a scalar or ``(B,)`` rewards.

        Raises:
            ValueError: wrong shapes or non-finite values.
        """
        if self.on_host and self._since_refactor + 1 < self.refactor_every:
            host = np.asarray(features, dtype=self._numpy_dtype)
            if host.shape == (self.dim,) or host.shape == (1, self.dim):
                self._update_one_on_host(host.reshape(-1), rewards)
                return
        y = self.as_tensor(features)
        if y.dim() == 1:
            y = y[None, :]  # (1, d)
        r = self.as_tensor(rewards).reshape(-1)  # (B,)
        if y.dim() != 2 or y.shape[1] != self.dim:
            raise ValueError(f"features must have shape (d,) or (B, d) with d = {self.dim}, got {tuple(y.shape)}")
        if r.shape[0] != y.shape[0]:
            raise ValueError(f"got {y.shape[0]} feature rows but {r.shape[0]} rewards")
        if not bool(torch.isfinite(y.sum() + r.sum())):  # one check: NaN or inf anywhere makes the sum non-finite
            raise ValueError("features and rewards must be finite")
        batch = y.shape[0]
        self.design = self.design.addmm(y.T, y)  # (d, d) Sigma + Y^T Y
        self.response_sum = self.response_sum.addmv(y.T, r)  # (d,) b + Y^T r
        self.rounds += batch
        self._since_refactor += batch
        if self._since_refactor >= self.refactor_every:
            self.refactorize()
        elif batch == 1:
            u = self.design_inverse @ y[0]  # (d,) Sigma^-1 y
            self.design_inverse = self.design_inverse.addr(u, u, alpha=-1.0 / float(1.0 + y[0] @ u))  # (d, d)
        else:
            u = y @ self.design_inverse  # (B, d) Y Sigma^-1
            capacitance = torch.eye(batch, device=self.device, dtype=self.dtype) + u @ y.T  # (B, B)
            factor = torch.linalg.cholesky(capacitance)  # (B, B)
            solved = torch.cholesky_solve(u, factor)  # (B, d) (I + Y Sigma^-1 Y^T)^-1 Y Sigma^-1
            self.design_inverse = self.design_inverse.addmm(u.T, solved, alpha=-1.0)  # (d, d)
        self.theta_hat = self.design_inverse @ self.response_sum  # (d,)

    def _update_one_on_host(self, y: np.ndarray, rewards: object) -> None:
        """:meth:`update` for one round, no refactorisation due, in NumPy (Sherman-Morrison)."""
        if type(rewards) is float and self._float64:  # the usual case: the reward's value as it is, no array
            reward = rewards
        else:
            r = np.asarray(rewards, dtype=self._numpy_dtype).reshape(-1)  # (1,)
            if r.shape[0] != 1:
                raise ValueError(f"got 1 feature row but {r.shape[0]} rewards")
            reward = r[0]
        if not math.isfinite(np.add.reduce(y) + reward):  # (y.sum() without its Python wrapper)
            raise ValueError("features and rewards must be finite")
        # In place, in the tensors' memory: no new tensor (nor view) per round
        theta_hat, inverse, design, response_sum = self._host_views()  # (d,), (d, d), (d, d), (d,)
        u = inverse @ y  # (d,) Sigma^-1 y
        design += y[:, None] * y  # (d, d) Sigma + y y^T (broadcast: no np.outer overhead)
        response_sum += reward * y  # (d,)
        inverse -= (u * (1.0 / float(1.0 + y @ u)))[:, None] * u  # (d, d)
        np.matmul(inverse, response_sum, out=theta_hat)  # (d,)
        self.rounds += 1
        self._since_refactor += 1

    def refactorize(self) -> None:
        """Recompute ``Sigma^-1`` exactly from ``Sigma`` (Cholesky), discarding rounding drift."""
        factor = torch.linalg.cholesky(self.design)  # (d, d)
        self.design_inverse = torch.cholesky_inverse(factor)  # (d, d)
        self.theta_hat = self.design_inverse @ self.response_sum  # (d,)
        self._since_refactor = 0
