"""Thompson-sampling analogue of EOFUL for the tokenized linear bandit (beyond the paper)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.agents.linear_confidence import (
    LinearConfidence,
    agent_confidence,
    check_ridge_arguments,
    masked_argmax,
)
from tokenized_bandit_gym.core.validation import check_real
from tokenized_bandit_gym.task import Task


class TokenizedLinTS:
    """Greedy decoding with a parameter sampled once per round from the ridge posterior.

    In round t, ``theta~_t ~ N(theta_hat_t, v_t^2 Sigma_t^-1)`` (linear Thompson sampling,
    Agrawal and Goyal 2013, with EOFUL's ``Sigma_t`` and ``theta_hat_t`` from
    :class:`tokenized_bandit_gym.agents.linear_confidence.LinearConfidence`); every token of the round is the allowed
    candidate maximising ``<theta~_t, e(x_t, y:tau)>``. After the round it learns from
    ``(e(x_t, y_t), r_t)`` exactly as EOFUL does. ``v_t = v`` when ``v`` is a number; with
    ``v="theory"`` it is EOFUL's radius ``sqrt(beta_t)``. The sample uses the agent's own
    ``torch.Generator`` seeded by :meth:`reset`.

    Args:
        v: posterior scale, a number >= 0 or ``"theory"``.
        lambda_: ridge parameter.
        delta: failure probability in ``beta_t`` (used by ``v="theory"``).
        sigma: noise scale in ``beta_t`` (used by ``v="theory"``).
        refactor_every: exact refactorisation period of ``Sigma^-1``.
    """

    name = "tokenized_lin_ts"

    def __init__(
        self,
        v: float | str = 0.1,
        lambda_: float = 1.0,
        delta: float = 0.05,
        sigma: float = 0.1,
        refactor_every: int = 1000,
    ) -> None:
        if isinstance(v, str):
            if v != "theory":
                raise ValueError(f"v must be 'theory' or a non-negative number, got {v!r}")
            self.v: float | None = None
        else:
            self.v = check_real("v", v, low=0.0)
        self.lambda_, self.delta, self.sigma, self.refactor_every = check_ridge_arguments(
            lambda_, delta, sigma, refactor_every
        )
        self.confidence: LinearConfidence | None = None
        self.theta_sample: torch.Tensor | None = None
        self._host_sample: tuple[torch.Tensor, np.ndarray] | None = None  # (theta_sample, its NumPy view)
        self._generator = torch.Generator()

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Start from ``Sigma_1 = lambda I`` and seed the sampler."""
        if task.embedding_dim is None:
            raise ValueError(f"TokenizedLinTS needs candidate embeddings; task {task.env_id!r} has none")
        self.confidence = agent_confidence(self, task.embedding_dim, task.max_length)
        self._generator = torch.Generator()
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(seed)
        self.theta_sample = None

    def sample(self, count: int = 1) -> torch.Tensor:
        """``count`` draws ``theta_hat + v L z`` with ``L L^T = Sigma^-1`` and ``z ~ N(0, I)``, ``(count, d)``."""
        confidence = self.confidence
        if confidence is None:
            raise ValueError("TokenizedLinTS.sample() called before reset(task)")
        if confidence.on_host:
            return torch.from_numpy(self._sample_on_host(confidence, count))  # (count, d)
        scale = self._scale(confidence)
        covariance = (confidence.design_inverse + confidence.design_inverse.T) / 2  # (d, d)
        factor = torch.linalg.cholesky(covariance)  # (d, d)
        noise = torch.randn(count, confidence.dim, generator=self._generator, dtype=confidence.dtype)  # (count, d)
        return confidence.theta_hat + scale * (noise.to(confidence.device) @ factor.T)  # (count, d)

    def _scale(self, confidence: LinearConfidence) -> float:
        """``v_t``: ``v``, or ``sqrt(beta_t)`` with ``v="theory"``."""
        return math.sqrt(confidence.beta()) if self.v is None else self.v

    def _sample_on_host(self, confidence: LinearConfidence, count: int) -> np.ndarray:
        """:meth:`sample` on the CPU as an array ``(count, d)``: NumPy's factor and product, torch's normal stream."""
        inverse = confidence.design_inverse.numpy()  # (d, d)
        factor = np.linalg.cholesky((inverse + inverse.T) / 2)  # (d, d)
        z = torch.randn(count, confidence.dim, generator=self._generator, dtype=confidence.dtype).numpy()  # (count, d)
        return confidence.theta_hat.numpy() + self._scale(confidence) * (z @ factor.T)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The allowed candidate maximising ``<theta~_t, e>`` (sampling ``theta~_t`` at a round's first token)."""
        confidence = self.confidence
        if confidence is None:
            raise ValueError("TokenizedLinTS.act() called before reset(task)")
        if not confidence.on_host:
            if self.theta_sample is None:
                self.theta_sample = self.sample()[0]  # (d,)
            embeddings = confidence.as_tensor(observation["candidate_embeddings"])  # (k, d)
            mask = torch.as_tensor(observation["action_mask"], device=confidence.device).bool()  # (k,)
            return int(masked_argmax(embeddings @ self.theta_sample, mask))
        # On the CPU: one NumPy product a step with the sample's view, made once a round
        theta_sample, host_sample = self.theta_sample, self._host_sample
        if theta_sample is None:  # a round's first token: draw in NumPy
            sample = self._sample_on_host(confidence, 1)[0]  # (d,)
            self.theta_sample = theta_sample = torch.from_numpy(sample)
            self._host_sample = host_sample = (theta_sample, sample)
        elif host_sample is None or host_sample[0] is not theta_sample:  # a sample set from outside
            self._host_sample = host_sample = (theta_sample, theta_sample.numpy())
        scores = np.asarray(observation["candidate_embeddings"], dtype=np.float64) @ host_sample[1]  # (k,)
        return int(masked_argmax(scores, observation["action_mask"]))  # (k,) int8: np.where reads nonzero as allowed

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Learn from ``(e(x_t, y_t), r_t)``; the next round draws a fresh sample."""
        if self.confidence is None:
            raise ValueError("TokenizedLinTS.update() called before reset(task)")
        if "response_embedding" not in info:
            raise ValueError("TokenizedLinTS.update() needs info['response_embedding'] (a TLB env)")
        self.confidence.update(info["response_embedding"], float(reward))
        self.theta_sample = None
