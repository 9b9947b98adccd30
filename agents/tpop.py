"""T-POP (Qu et al., "Test-Time Personalization with Online Preference Feedback", arXiv 2509.24696)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenized_bandit_gym.agents.bradley_terry import BradleyTerryFit
from tokenized_bandit_gym.agents.dueling_eoful import candidate_features, check_pairwise_task
from tokenized_bandit_gym.agents.linear_confidence import LinearConfidence, masked_argmax
from tokenized_bandit_gym.core.validation import check_choice, check_int, check_real
from tokenized_bandit_gym.task import Task

COVARIANCES = ("diagonal", "full")


class TPOP:
    """T-POP's token-level dueling decoder with a linear reward head ``r_hat(e) = <w, e>`` on the env's features.

    T-POP decodes two responses token by token against a frozen LLM (in lockstep; here one after
    the other, which the pairwise env does: see :mod:`tokenized_bandit_gym.envs.pairwise_feedback`).
    With ``p(tau)`` the LM's probability of candidate tau (``exp(candidate_logprobs)``; 0 on an env
    without an LM, such as the TLB) and ``g(e) = grad_w r_hat(e) = e`` (the linear head's gradient):

    * the exploit arm (first response) takes ``argmax_tau p(tau) + rho * sigma(r_hat(e(y:tau)))``;
    * the exploration arm (second response) takes, at position i,
      ``argmax_tau p(tau) + rho * (sigma(r_hat(e(y:tau))) + nu ||g(e(y:tau)) - g(e1_i)||_{V^-1})``, where
      ``e1_i`` is the exploit arm's chosen candidate at position i, and must differ from the exploit
      arm's token at position i (its best candidate is replaced by its runner-up when they are equal
      and another candidate is allowed);
    * after each position i of the exploration arm, ``V += (g1_i - g2_i)(g1_i - g2_i)^T``
      (``V_1 = lambda I``), as T-POP's loop updates it at every token;
    * after the comparison, the reward head is refitted on every comparison so far by
      Bradley-Terry (T-POP retrains its reward model from its initialisation on all collected
      pairs with ``binary_cross_entropy_with_logits(s1 - s2, label)`` and a weight decay; with a
      linear head that is the regularised logistic MLE,
      :class:`~tokenized_bandit_gym.agents.bradley_terry.BradleyTerryFit`).

    ``covariance``: ``"diagonal"`` keeps only ``diag(V)`` (what T-POP's released code does:
    ``model.py`` keeps ``V_inv`` as one vector the size of the reward model's parameters and
    updates it elementwise), ``"full"`` keeps ``V^-1`` by rank-one Sherman-Morrison updates
    (:class:`~tokenized_bandit_gym.agents.linear_confidence.LinearConfidence`). One difference
    from the released code, deliberate: it adds ``(g1 - g2)^2`` to ``V^-1`` itself, so its
    exploration bonus grows with data; here the squares are added to ``V`` and the bonus uses its
    inverse, the elliptical bonus the neural dueling bandits T-POP builds on define. The LLM-side
    costs of T-POP's loop (a full forward per token, candidates decoded to text and re-embedded by
    a second model) are what ``benchmarks/tpop_loop.py`` measures; this agent reads the env's
    KV-cached features instead.

    Args:
        reward_weight: rho, the weight of the reward head against ``p(tau)`` (T-POP's ``weight``).
        nu: the exploration weight (T-POP's ``nu_mab``).
        lambda_: ``V_1 = lambda I`` and the Bradley-Terry ridge weight (T-POP's ``lambda_mab``).
        covariance: ``"diagonal"`` or ``"full"``.
        refactor_every: exact refactorisation period of the full ``V^-1`` in updates.
    """

    name = "tpop"
    feedback_channels = ("pairwise",)

    def __init__(
        self,
        reward_weight: float = 1.0,
        nu: float = 1.0,
        lambda_: float = 1.0,
        covariance: str = "diagonal",
        refactor_every: int = 1000,
    ) -> None:
        self.reward_weight = check_real("reward_weight", reward_weight, low=0.0)
        self.nu = check_real("nu", nu, low=0.0)
        self.lambda_ = check_real("lambda_", lambda_, low=0.0)
        self.covariance = check_choice("covariance", covariance, COVARIANCES)
        self.refactor_every = check_int("refactor_every", refactor_every, minimum=1)
        self.estimate: BradleyTerryFit | None = None
        self.confidence: LinearConfidence | None = None  # the full V^-1
        self.design_diagonal: np.ndarray | None = None  # (d,) diag(V)
        self._exploit_path: list[np.ndarray] = []  # (d,) the exploit arm's chosen candidate, per position
        self._chosen: np.ndarray | None = None  # (d,) the exploration arm's last chosen candidate

    def reset(self, task: Task, seed: int | None = None) -> None:
        """``V_1 = lambda I``, ``w = 0`` (deterministic: ``seed`` unused).

        Raises:
            ValueError: the task's feedback is not pairwise, or it has no candidate embeddings.
        """
        dim = check_pairwise_task(task, "TPOP")
        self.estimate = BradleyTerryFit(dim, self.lambda_, capacity=task.horizon)
        self.confidence = None
        self.design_diagonal = None
        if self.covariance == "full":
            self.confidence = LinearConfidence(dim, task.max_length, self.lambda_, refactor_every=self.refactor_every)
        else:
            self.design_diagonal = np.full(dim, self.lambda_)
        self._exploit_path = []
        self._chosen = None

    @property
    def theta_hat(self) -> np.ndarray:
        """``(d,)`` the reward head's weights ``w``."""
        return self._require().theta_hat

    def _require(self) -> BradleyTerryFit:
        if self.estimate is None:
            raise ValueError("TPOP used before reset(task)")
        return self.estimate

    def bonus_widths(self, differences: np.ndarray) -> np.ndarray:
        """``||z||_{V^-1}`` for ``(..., d)`` differences ``z``, with the diagonal or the full ``V``."""
        if self.confidence is not None:
            return self.confidence.width_host(differences)
        assert self.design_diagonal is not None
        return np.sqrt((differences**2 / self.design_diagonal).sum(-1))

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The exploit arm's candidate (first response) or the exploration arm's (second), by ``first_length``."""
        estimate = self._require()
        embeddings, mask = candidate_features(observation)  # (k, d), (k,)
        probabilities = np.zeros(len(mask))  # (k,) p(tau), none without an LM
        if "candidate_logprobs" in observation:
            probabilities = np.exp(np.asarray(observation["candidate_logprobs"], dtype=np.float64))
        rewards = 1.0 / (1.0 + np.exp(-(embeddings @ estimate.theta_hat)))  # (k,) sigma(r_hat(e))
        first_length = int(observation["first_length"])
        if first_length == 0:  # the exploit arm
            index = int(masked_argmax(probabilities + self.reward_weight * rewards, mask))
            self._exploit_path.append(embeddings[index])
            return index
        position = int(observation["length"])
        exploit = self._exploit_path[min(position, len(self._exploit_path) - 1)]  # (d,) g(e1_i)
        bonus = self.bonus_widths(embeddings - exploit)  # (k,)
        scores = probabilities + self.reward_weight * (rewards + self.nu * bonus)  # (k,)
        allowed = mask
        if position < first_length:  # differ from the exploit arm's token here, if another candidate is allowed
            exploit_token = int(np.asarray(observation["first_response"])[position])
            differing = mask & (np.asarray(observation["candidate_tokens"]) != exploit_token)
            if differing.any():
                allowed = differing
        index = int(masked_argmax(scores, allowed))
        difference = exploit - embeddings[index]  # (d,) g1_i - g2_i
        if self.confidence is not None:
            self.confidence.update(difference, 0.0)  # V += z z^T (rank one)
        else:
            assert self.design_diagonal is not None
            self.design_diagonal += difference**2
        self._chosen = embeddings[index]
        return index

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Refit the reward head on every comparison so far (Bradley-Terry), with this one: ``e1 - e2`` and the bit."""
        estimate = self._require()
        if not self._exploit_path or self._chosen is None:
            raise ValueError("update() needs a round of two responses played with act()")
        estimate.add(self._exploit_path[-1] - self._chosen, float(reward))
        estimate.fit()
        self._exploit_path = []
        self._chosen = None
