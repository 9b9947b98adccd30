"""Known monotone maps ``v`` from the LM probability ``p(x, y)`` to utility (paper section 5.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

VALUE_MAPS = ("logprob", "scaled_logprob", "root_prob", "prob")


@dataclass(frozen=True)
class ValueMap:
    """``v(p)``, computed from the log-probability ``log p(y | x)`` (natural log).

    | name | v(p) | range |
    |---|---|---|
    | ``logprob`` (paper default) | ``log p`` | ``(-inf, 0]`` |
    | ``scaled_logprob`` | ``log p / L`` | ``(-inf, 0]`` |
    | ``root_prob`` | ``p ** (1 / L)`` (geometric mean over L positions) | ``[0, 1]`` |
    | ``prob`` | ``p`` | ``[0, 1]`` |

    Every map is strictly increasing in ``p`` (``L`` is the fixed ``max_length``), as the paper's
    reduction to TLB requires.

    Attributes:
        name: one of :data:`VALUE_MAPS`.
        max_length: L.
    """

    name: str
    max_length: int

    def __post_init__(self) -> None:
        if self.name not in VALUE_MAPS:
            raise ValueError(f"value_map must be one of {VALUE_MAPS}, got {self.name!r}")

    def __call__(self, logprob: torch.Tensor) -> torch.Tensor:
        """``v`` of sequences with log-probabilities ``logprob`` (any shape)."""
        if self.name == "logprob":
            return logprob
        if self.name == "scaled_logprob":
            return logprob / self.max_length
        if self.name == "root_prob":
            return torch.exp(logprob / self.max_length)
        return torch.exp(logprob)

    @property
    def bounds(self) -> tuple[float, float]:
        """``(low, high)`` of ``v``."""
        if self.name in ("logprob", "scaled_logprob"):
            return -math.inf, 0.0
        return 0.0, 1.0
