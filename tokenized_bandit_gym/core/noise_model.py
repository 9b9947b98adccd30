"""Reward noise eta_t of the paper's reward r_t = u_t(y_t) + eta_t (section 2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenized_bandit_gym.core.validation import check_choice, check_real

NOISE_KINDS = ("gaussian", "bounded")

LARGEST_STANDARD_DRAW = {"gaussian": 64.0, "bounded": 1.0}
"""The largest magnitude of a draw at ``scale = 1``, per kind: 1 for uniform noise; for Gaussian noise 64, far
beyond any draw NumPy makes (a standard normal beyond 40 has probability below 1e-300)."""

REWARD_DTYPE = np.float64
"""The dtype of every reward (and of each draw ``eta``)."""


@dataclass(frozen=True)
class NoiseModel:
    """Zero-mean reward noise.

    Attributes:
        kind: ``"gaussian"`` (N(0, scale^2), sub-Gaussian with parameter ``scale``) or
            ``"bounded"`` (uniform on ``[-scale, scale]``, the paper's ``|eta_t| <= sigma``).
        scale: sigma >= 0; 0 gives noise-free rewards.
    """

    kind: str = "gaussian"
    scale: float = 0.1

    def __post_init__(self) -> None:
        check_choice("noise", self.kind, NOISE_KINDS)
        scale = check_real("noise_scale", self.scale, low=0.0)
        largest = self.largest_scale(self.kind)
        if scale > largest:
            raise ValueError(
                f"noise_scale={self.scale!r} would overflow the {np.dtype(REWARD_DTYPE)} reward: {self.kind} draws "
                f"reach {LARGEST_STANDARD_DRAW[self.kind]:g} x noise_scale; it must be <= {largest:.4g}"
            )

    @staticmethod
    def largest_scale(kind: str) -> float:
        """The largest ``scale`` whose draws cannot overflow the reward's dtype.

        A draw is at most ``LARGEST_STANDARD_DRAW[kind] * scale``; half of the dtype's range is left for the
        utility it is added to, so ``reward = u + eta`` stays finite (``noise_scale=1e308`` gave ``-inf`` rewards).
        """
        return float(np.finfo(REWARD_DTYPE).max) / 2 / LARGEST_STANDARD_DRAW[kind]

    def sample(self, rng: np.random.Generator) -> float:
        """Draw one eta from ``rng`` (always one draw, so streams stay aligned)."""
        if self.kind == "gaussian":
            return float(rng.normal(0.0, 1.0) * self.scale)
        return float(rng.uniform(-1.0, 1.0) * self.scale)

    def sample_many(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Draw ``count`` etas at once, ``(count,)`` float64.

        Equal, value for value, to ``count`` calls of :meth:`sample` on the same generator
        (NumPy draws normals and uniforms one at a time either way); the vector env relies on it.
        """
        if self.kind == "gaussian":
            return rng.normal(0.0, 1.0, size=count) * self.scale
        return rng.uniform(-1.0, 1.0, size=count) * self.scale
