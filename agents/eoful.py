"""EOFUL: excessive optimism under the face of uncertainty (paper Algorithm 1)."""

from __future__ import annotations

import math
from typing import Any, cast

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

FEATURE_SCALES = ("first_observation",)
"""The named ``feature_scale`` of :class:`EOFUL` (a positive number is the other kind)."""


def check_feature_scale(scale: str | float) -> str | float:
    """``scale`` if it is ``"first_observation"`` or a positive finite number.

    Raises:
        ValueError: another string, or a number that is not positive and finite.
        TypeError: neither a string nor a real number.
    """
    if isinstance(scale, str):
        if scale not in FEATURE_SCALES:
            raise ValueError(f"feature_scale must be 'first_observation' or a positive number, got {scale!r}")
        return scale
    value = check_real("feature_scale", scale, low=0.0)
    if value <= 0.0:
        raise ValueError(f"feature_scale must be positive, got {scale!r}")
    return value


def beta_scale(beta: str | float) -> float:
    """The factor on ``sqrt(beta_t)``: 1 for ``"theory"``, else ``beta`` itself (>= 0).

    Raises:
        ValueError: a string other than ``"theory"``, or a negative or non-finite number.
        TypeError: neither a string nor a real number.
    """
    if isinstance(beta, str):
        if beta != "theory":
            raise ValueError(f"beta must be 'theory' or a non-negative number, got {beta!r}")
        return 1.0
    return check_real("beta", beta, low=0.0)


class EOFUL:
    """Greedy decoding with optimistic token scores from a linear confidence set (Algorithm 1).

    In round t every allowed candidate tau is scored by ``max_{v in C_t} <v, e(x_t, y:tau)>
    = <theta_hat_t, e> + sqrt(beta_t) ||e||_{Sigma_t^-1}`` (eq. update-c) and the best one is
    appended, until EOS; then the response embedding ``y_t = e(x_t, y_t)`` and reward ``r_t``
    update ``Sigma``, ``theta_hat`` (eq. update-theta) and ``C_{t+1}``. The linear algebra is in
    :class:`tokenized_bandit_gym.agents.linear_confidence.LinearConfidence` (Sherman-Morrison updates, periodic
    refactorisation). ``C_1 = {0}`` as in the paper, so in round 1 every score is 0 and the
    lowest allowed index wins (the first round is arbitrary); ties always go to the lowest index.

    Works on any env whose observation carries ``candidate_embeddings`` ``(k, d)`` and
    ``action_mask`` ``(k,)`` (k need not equal n): the action is a candidate index.

    Diagnostics of Assumption 4 (the paper's Figure 2, right): after each round, with ``y^(1:l)``
    the embedding of the chosen candidate at step l (the prefix of length l) and ``Sigma_t`` the
    design matrix *used in that round* (before its update), two ratios per position l:

    - ``rho_l = ||y^(1:l)||_{Sigma_t} / ||y||_{Sigma_t}`` with ``||x||_A = sqrt(x^T A x)``, the norm
      Assumption 4 states (Sigma_t itself); ``prefix_ratio_max[t]`` / ``prefix_ratio_mean[t]``;
    - ``w_l = ||y^(1:l)||_{Sigma_t^-1} / ||y||_{Sigma_t^-1}``, the ratio Theorem 3.2's proof uses
      (``w_t(y^(1:k)) <= c w_t(y_t)`` with ``w_t(x) = sqrt(x^T Sigma_t^-1 x)``, the confidence
      width); ``prefix_inverse_ratio_max[t]`` / ``prefix_inverse_ratio_mean[t]``.

    Each is the max / mean over ``l = 1 .. |y_t|``. The two differ: a prefix along a direction
    the data rarely covered has a small Sigma_t-norm but a large Sigma_t^-1-norm. They are
    recorded only with ``record_ratios=True`` (else the four are empty): 32 bytes per round in
    float64 arrays preallocated for the task's horizon (doubled if a run goes past it), so a long
    run keeps no Python object per round. The ``Sigma_t^-1`` norms are the widths the round's
    scoring computed; the ``Sigma_t`` norms cost one ``(|y| + 1, d) x (d, d)`` product per round.

    Batched learning (vector envs): :meth:`select` scores ``(B, k, d)`` candidates with one
    confidence set and :meth:`learn` updates with B rounds at once.

    Args:
        beta: ``"theory"`` for the paper's ``beta_t``, or a number multiplying ``sqrt(beta_t)``
            (practitioners shrink it; 0 is greedy on ``theta_hat``).
        lambda_: ridge parameter, ``Sigma_1 = lambda I``.
        delta: failure probability in ``beta_t``.
        sigma: noise scale in ``beta_t`` (0.1 is the envs' default ``noise_scale``).
        refactor_every: exact refactorisation period of ``Sigma^-1`` in rounds.
        device: torch device of the confidence set.
        record_ratios: record the Assumption 4 ratios of every round (off by default).
        feature_scale: EOFUL runs on ``e / S``: ``1.0`` (the default) is the paper's Algorithm 1 on the
            features as given; a number is ``S``; ``"first_observation"`` takes ``S`` as the largest
            candidate norm of the first observation, fixed for the run. Section 3's analysis assumes
            ``||e|| <= 1`` (and ``||theta|| <= 1``), which the radius ``sqrt(beta_t)`` of eq. update-c rests on;
            raw LLM features have ``||[e : v]||`` of about 25 on SmolLM2, so the theory radius then
            explores for hundreds of rounds. Dividing every feature by one constant keeps the model linear
            (``theta`` becomes ``S theta``; the rewards are unchanged), so greedy on ``theta_hat`` is the same
            estimator with ridge ``lambda / S^2``. Later features may exceed norm 1 a little.

    Practitioners' knobs, both off by default (the theory's EOFUL): ``feature_scale`` above and ``beta``, the
    radius multiplier on ``sqrt(beta_t)``. Choose the multiplier on a seed that is not reported.
    """

    name = "eoful"

    def __init__(
        self,
        beta: str | float = "theory",
        lambda_: float = 1.0,
        delta: float = 0.05,
        sigma: float = 0.1,
        refactor_every: int = 1000,
        device: str | torch.device = "cpu",
        record_ratios: bool = False,
        feature_scale: str | float = 1.0,
    ) -> None:
        if not isinstance(record_ratios, bool):
            raise TypeError(f"record_ratios must be a bool, got {record_ratios!r}")
        self.record_ratios = record_ratios
        self.feature_scale = check_feature_scale(feature_scale)
        self._scale: float | None = None  # S of the run (None until the first observation, with "first_observation")
        self.beta_scale = beta_scale(beta)
        self.lambda_, self.delta, self.sigma, self.refactor_every = check_ridge_arguments(
            lambda_, delta, sigma, refactor_every
        )
        self.device = torch.device(device)
        self.confidence: LinearConfidence | None = None
        self._ratios = np.empty((4, 0))  # (4, capacity) rho max, rho mean, w max, w mean per round
        self._recorded = 0  # rounds recorded in _ratios
        self._prefixes: list[torch.Tensor | np.ndarray] = []  # chosen candidates' embeddings, (d,) each
        self._prefix_widths: list[float] = []  # their ||.||_{Sigma_t^-1}, from the scoring (host, record_ratios)

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Start from ``Sigma_1 = lambda I``, ``theta_hat_1 = 0`` (EOFUL is deterministic; seed unused)."""
        if task.embedding_dim is None:
            raise ValueError(f"EOFUL needs candidate embeddings; task {task.env_id!r} has none (embedding_dim=None)")
        self.confidence = agent_confidence(self, task.embedding_dim, task.max_length, self.device)
        self._ratios = np.empty((4, task.horizon if self.record_ratios else 0))
        self._recorded = 0
        self._prefixes = []
        self._prefix_widths = []
        self._scale = None if isinstance(self.feature_scale, str) else float(self.feature_scale)

    @property
    def scale(self) -> float | None:
        """S, the divisor of every feature this run (None until the first observation with ``"first_observation"``)."""
        return self._scale

    def scaled(self, features: Any) -> Any:
        """``features / S`` (NumPy or torch, ``(..., d)``); with ``"first_observation"`` the first call sets S."""
        if not isinstance(features, torch.Tensor):
            features = np.asarray(features)
        if self._scale is None:
            norms = features.norm(dim=-1) if isinstance(features, torch.Tensor) else np.linalg.norm(features, axis=-1)
            largest = float(norms.max()) if norms.shape and norms.shape[0] else float(norms)
            self._scale = largest if largest > 0.0 else 1.0
        return features if self._scale == 1.0 else features / self._scale

    @property
    def prefix_ratio_max(self) -> np.ndarray:
        """``(rounds,)`` ``max_l ||y^(1:l)||_{Sigma_t} / ||y||_{Sigma_t}`` a round (empty unless ``record_ratios``)."""
        return self._ratios[0, : self._recorded]

    @property
    def prefix_ratio_mean(self) -> np.ndarray:
        """``(rounds,)`` per round, the mean over l of the ``Sigma_t`` ratios (empty unless ``record_ratios``)."""
        return self._ratios[1, : self._recorded]

    @property
    def prefix_inverse_ratio_max(self) -> np.ndarray:
        """``(rounds,)`` per round, ``max_l w_t(y^(1:l)) / w_t(y)`` (empty unless ``record_ratios``)."""
        return self._ratios[2, : self._recorded]

    @property
    def prefix_inverse_ratio_mean(self) -> np.ndarray:
        """``(rounds,)`` per round, the mean over l of the ``Sigma_t^-1`` ratios (empty unless ``record_ratios``)."""
        return self._ratios[3, : self._recorded]

    def _require_confidence(self) -> LinearConfidence:
        if self.confidence is None:
            raise ValueError("EOFUL used before reset(task)")
        return self.confidence

    def select(self, candidate_embeddings: object, action_mask: object) -> torch.Tensor:
        """Optimistic greedy choice for B rounds decoded with the current ``C_t``.

        Args:
            candidate_embeddings: ``(B, k, d)`` ``e(x, y:tau)`` per candidate.
            action_mask: ``(B, k)`` allowed candidates (bool or 0/1).

        Returns:
            ``(B,)`` int64 candidate indices (lowest index on ties).
        """
        confidence = self._require_confidence()
        return self._select_scaled(self.scaled(confidence.as_tensor(candidate_embeddings)), action_mask)

    def _select_scaled(self, candidate_embeddings: torch.Tensor, action_mask: object) -> torch.Tensor:
        """:meth:`select` on features already divided by S."""
        confidence = self._require_confidence()
        scores = confidence.ucb(candidate_embeddings, self.beta_scale)  # (B, k)
        mask = torch.as_tensor(action_mask, device=confidence.device).bool()  # (B, k)
        if mask.shape != scores.shape:
            raise ValueError(f"action_mask has shape {tuple(mask.shape)}, scores have {tuple(scores.shape)}")
        if not mask.any(dim=-1).all():
            raise ValueError("every row of action_mask must allow at least one candidate")
        return masked_argmax(scores, mask)  # (B,)

    def learn(self, response_embeddings: object, rewards: object) -> None:
        """Update ``C_t`` with B rounds: ``(B, d)`` response embeddings and ``(B,)`` rewards."""
        confidence = self._require_confidence()
        confidence.update(self.scaled(confidence.as_tensor(response_embeddings)), rewards)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The allowed candidate with the highest UCB score (NumPy on the CPU, torch on a GPU)."""
        confidence = self._require_confidence()
        if confidence.on_host:
            embeddings = self.scaled(np.asarray(observation["candidate_embeddings"]))  # (k, d)
            mask = np.asarray(observation["action_mask"]).astype(bool)  # (k,)
            if self.record_ratios:
                scores, widths = confidence.ucb_and_width_host(embeddings, self.beta_scale)  # (k,) each
            else:
                scores = confidence.ucb_host(embeddings, self.beta_scale)  # (k,)
            if mask.shape != scores.shape:
                raise ValueError(f"action_mask has shape {mask.shape}, scores have {scores.shape}")
            index = int(masked_argmax(scores, mask))
            if not mask[index]:  # only when no candidate is allowed (the scores are finite)
                raise ValueError("every row of action_mask must allow at least one candidate")
            self._prefixes.append(embeddings[index])
            if self.record_ratios:
                self._prefix_widths.append(float(widths[index]))
            return index
        embeddings = self.scaled(confidence.as_tensor(observation["candidate_embeddings"]))  # (k, d)
        index = int(self._select_scaled(embeddings[None], np.asarray(observation["action_mask"])[None])[0])
        self._prefixes.append(embeddings[index])
        return index

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Record the Assumption 4 ratios under ``Sigma_t`` and ``Sigma_t^-1``, then learn from ``(y_t, r_t)``."""
        confidence = self._require_confidence()
        if "response_embedding" in info:
            response = self.scaled(info["response_embedding"])  # (d,)
        elif self._prefixes:
            response = self._prefixes[-1]  # (d,) the last chosen candidate is the whole response
        else:
            raise ValueError("update() needs info['response_embedding'] or a round played with act()")
        if self.record_ratios and self._prefixes:
            self._record_ratios(confidence, response)
        confidence.update(response if confidence.on_host else confidence.as_tensor(response), float(reward))
        self._prefixes = []
        self._prefix_widths = []

    def _record_ratios(self, confidence: LinearConfidence, response: object) -> None:
        """Append the round's Assumption 4 ratios under ``Sigma_t`` and ``Sigma_t^-1`` (before the update)."""
        if confidence.on_host:
            rows = np.stack([*self._prefixes, np.asarray(response)])  # (|y| + 1, d): the prefixes, then y
            sigma_norms = confidence.mahalanobis_host(rows)  # (|y| + 1,)
            norms = [
                (sigma_norms[:-1], float(sigma_norms[-1])),
                (np.array(self._prefix_widths), float(confidence.width_host(rows[-1]))),
            ]
        else:
            prefixes = torch.stack(cast("list[torch.Tensor]", self._prefixes))  # (|y|, d) tensors off the host
            response_tensor = confidence.as_tensor(response)  # (d,)
            norms = [
                (norm(prefixes).cpu().numpy(), float(norm(response_tensor)))
                for norm in (confidence.mahalanobis, confidence.width)
            ]
        if self._recorded == self._ratios.shape[1]:  # past the horizon: double the columns
            grown = np.empty((4, max(1, 2 * self._recorded)))
            grown[:, : self._recorded] = self._ratios
            self._ratios = grown
        column = self._ratios[:, self._recorded]  # (4,)
        for offset, (prefix_norms, total) in zip((0, 2), norms, strict=True):
            ratios = prefix_norms / total if total > 0.0 else np.full(prefix_norms.shape, math.nan)
            column[offset] = ratios.max()
            column[offset + 1] = ratios.sum() / ratios.size  # = ratios.mean(), without its overhead
        self._recorded += 1
