"""Reward noise eta_t of the paper's reward r_t = u_t(y_t) + eta_t (section 2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenized_bandit_gym.core.validation import check_choice, check_real

NOISE_KINDS = ("gaussian", "bounded")


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
        check_real("noise_scale", self.scale, low=0.0)

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
