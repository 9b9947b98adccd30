"""Dueling EOFUL: token-level contextual dueling with a Bradley-Terry confidence ellipsoid (CoLSTIM's arm pair)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tokenized_bandit_gym.agents.bradley_terry import BradleyTerryFit
from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence, masked_argmax
from tokenized_bandit_gym.core.validation import check_int, check_real
from tokenized_bandit_gym.task import Task


def candidate_features(observation: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The observation's ``(k, d)`` float64 candidate features and ``(k,)`` bool mask, or ValueError."""
    if "candidate_embeddings" not in observation:
        raise ValueError("a pairwise linear agent needs observation['candidate_embeddings'] (TLB or alignment env)")
    return (
        np.asarray(observation["candidate_embeddings"], dtype=np.float64),
        np.asarray(observation["action_mask"]).astype(bool),
    )


def check_pairwise_task(task: Task, agent_name: str) -> int:
    """The feature width d of a pairwise task with candidate features, or ValueError naming what is missing."""
    if task.feedback != "pairwise":
        raise ValueError(
            f"{agent_name} learns from pairwise comparisons, but the env gives feedback={task.feedback!r}: "
            "make it with feedback='pairwise'"
        )
    spaces = getattr(task.observation_space, "spaces", {})
    if "candidate_embeddings" not in spaces:
        raise ValueError(f"{agent_name} needs candidate embeddings; task {task.env_id!r} has none")
    return int(spaces["candidate_embeddings"].shape[-1])


class DuelingEOFUL:
    """Two responses a round: the first greedy under the Bradley-Terry estimate, the second optimistic relative to it.

    The pair rule of CoLSTIM (Bengs, Saha and Hüllermeier, "Stochastic Contextual Dueling Bandits
    under Linear Stochastic Transitivity Models", ICML 2022, Algorithm 1), with its first arm
    taken greedily (CoLSTIM perturbs it; greedy is its zero-perturbation case), decoded token by
    token as EOFUL decodes (paper Algorithm 1), on an env with ``feedback="pairwise"``:

    * first response: at each position the allowed candidate maximising ``<theta_hat_t, e(x, y:tau)>``;
      its complete embedding is ``e1``;
    * second response: the candidate maximising
      ``<theta_hat_t, e(x, y:tau)> + beta sqrt(beta_t) ||e(x, y:tau) - e1||_{V_t^-1}``, optimistic
      about the difference from the first (what a comparison can teach);
    * update with the comparison ``(z_t = e1 - e2, preference bit)``: ``V_{t+1} = V_t + z_t z_t^T``
      by a rank-one (Sherman-Morrison) update of ``V^-1`` with periodic refactorisation
      (:class:`~tokenized_bandit_gym.agents.linear_confidence.LinearConfidence`, as EOFUL), and
      ``theta_hat_{t+1}`` the regularised logistic MLE of every comparison so far
      (:class:`~tokenized_bandit_gym.agents.bradley_terry.BradleyTerryFit`, Newton's method).

    ``V_1 = lambda I``; ``beta_t`` is the paper's radius with ``sigma = 1/2`` (a Bernoulli label is
    1/2-sub-Gaussian), ``beta`` multiplies its square root (the logistic link's ``1 / kappa`` factor
    is left to ``beta``). Ties go to the lowest index. The env's ``info["regret"]`` is the dueling
    regret ``u* - (u1 + u2) / 2``.

    Args:
        beta: the factor on ``sqrt(beta_t)`` (>= 0; 0 makes both responses greedy).
        lambda_: ``V_1 = lambda I`` and the MLE's ridge weight (> 0).
        delta: failure probability in ``beta_t``.
        refactor_every: exact refactorisation period of ``V^-1`` in rounds.
    """

    name = "dueling_eoful"
    feedback_channels = ("pairwise",)

    def __init__(
        self, beta: float = 1.0, lambda_: float = 1.0, delta: float = 0.05, refactor_every: int = 1000
    ) -> None:
        self.beta = check_real("beta", beta, low=0.0)
        self.lambda_ = check_real("lambda_", lambda_, low=0.0)
        self.delta = check_real("delta", delta, low=0.0, high=1.0)
        self.refactor_every = check_int("refactor_every", refactor_every, minimum=1)
        self.confidence: LinearConfidence | None = None
        self.estimate: BradleyTerryFit | None = None
        self._chosen: np.ndarray | None = None  # (d,) the last chosen candidate's features
        self._first: np.ndarray | None = None  # (d,) e1, while the second response is decoded

    def reset(self, task: Task, seed: int | None = None) -> None:
        """``V_1 = lambda I``, ``theta_hat_1 = 0`` (deterministic: ``seed`` unused).

        Raises:
            ValueError: the task's feedback is not pairwise, or it has no candidate embeddings.
        """
        dim = check_pairwise_task(task, "DuelingEOFUL")
        self.confidence = LinearConfidence(
            dim, task.max_length, self.lambda_, sigma=0.5, delta=self.delta, refactor_every=self.refactor_every
        )
        self.estimate = BradleyTerryFit(dim, self.lambda_, capacity=task.horizon)
        self._chosen = self._first = None

    @property
    def theta_hat(self) -> np.ndarray:
        """``(d,)`` the current Bradley-Terry estimate."""
        return self._require()[1].theta_hat

    def _require(self) -> tuple[LinearConfidence, BradleyTerryFit]:
        if self.confidence is None or self.estimate is None:
            raise ValueError("DuelingEOFUL used before reset(task)")
        return self.confidence, self.estimate

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The first response's greedy candidate, or the second's optimistic one (by ``first_length``)."""
        confidence, estimate = self._require()
        embeddings, mask = candidate_features(observation)  # (k, d), (k,)
        scores = embeddings @ estimate.theta_hat  # (k,)
        if int(observation["first_length"]) > 0:  # the second response
            if self._first is None:  # its first step: the first response is complete
                self._first = self._chosen
            radius = self.beta * math.sqrt(confidence.beta())
            scores = scores + radius * confidence.width_host(embeddings - self._first)  # (k,)
        index = int(masked_argmax(scores, mask))
        if not mask[index]:
            raise ValueError("every row of action_mask must allow at least one candidate")
        self._chosen = embeddings[index]
        return index

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Learn from the comparison: ``z = e1 - e2`` with the preference bit ``reward``."""
        confidence, estimate = self._require()
        if self._first is None or self._chosen is None:
            raise ValueError("update() needs a round of two responses played with act()")
        difference = self._first - self._chosen  # (d,) e1 - e2
        estimate.add(difference, float(reward))
        estimate.fit()
        confidence.update(difference, 0.0)  # V += z z^T (the ridge estimate it also keeps is not used)
        self._chosen = self._first = None
