"""EOFUL for the batched-bandit setting: N rounds decoded at once, one ridge update per batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.core.validation import check_int, check_real
from tokenized_bandit_gym.task import Task


def _tensor(value: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An array or tensor as a tensor on ``device``."""
    tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.asarray(value))
    return tensor.to(device=device, dtype=dtype) if dtype is not None else tensor.to(device)


class BatchedEOFUL:
    """EOFUL (paper Algorithm 1, section 3.1) as a :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent`.

    Every token is the allowed candidate with the highest optimistic utility over the
    confidence ball ``C = {theta: ||theta - theta_hat||_Sigma^2 <= beta}`` (eq. (3)):
    ``max_{theta in C} <theta, e(x, y:tau)> = <theta_hat, e> + sqrt(beta) ||e||_{Sigma^-1}``,
    for all N sub-envs and k candidates as one batched product. ``Sigma = lambda I + sum_s
    y_s y_s^T`` and ``theta_hat = Sigma^-1 sum_s r_s y_s`` (eq. (2), ridge regression on the
    response embeddings ``y_s = e(x_s, y_s)`` from ``info["response_embedding"]``), and
    ``beta_t = sigma^2 (2 + 4 d log(1 + t L / d) + 8 log(4 / delta))`` with t the number of
    rounds learned from plus one. Before the first update ``C_1 = {0}``: every score is 0 and
    ties go to the lowest allowed id, as in the paper.

    Batching: the confidence set stays fixed until ``batch_size`` rounds have ended since the
    last update; then all of them enter ``Sigma^-1`` at once by the Woodbury identity (a
    block Sherman-Morrison update, ``O(M d^2 + M^2 d + M^3)`` for M rounds), with an exact
    refactorisation (Cholesky) every ``refactor_every`` updates against drift.
    ``batch_size=1`` on a one-sub-env vector env is sequential EOFUL. Rounds still in flight
    at an update continue with the new confidence set for their remaining tokens (the
    analysis fixes C_t for a whole round; this variant never uses staler information).

    Args:
        noise_scale: sigma of the env's reward noise (in beta_t).
        regularization: lambda > 0.
        delta: confidence level in (0, 1); None gives 1 / T (the paper's choice for its bound).
        beta_scale: multiplies beta_t (1 is the paper's radius).
        batch_size: rounds per update, >= 1.
        refactor_every: updates between exact refactorisations of ``Sigma^-1``.
        device: where the agent's tensors live (e.g. the vector env's device).
    """

    name = "batched_eoful"

    def __init__(
        self,
        noise_scale: float = 0.1,
        regularization: float = 1.0,
        delta: float | None = None,
        beta_scale: float = 1.0,
        batch_size: int = 1,
        refactor_every: int = 64,
        device: str | torch.device = "cpu",
    ) -> None:
        self.noise_scale = check_real("noise_scale", noise_scale, low=0.0)
        self.regularization = check_real("regularization", regularization, low=0.0)
        if self.regularization == 0.0:
            raise ValueError(f"regularization must be > 0, got {regularization!r}")
        if delta is not None:
            check_real("delta", delta, low=0.0, high=1.0)
            if delta in (0.0, 1.0):
                raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        self.delta = delta
        self.beta_scale = check_real("beta_scale", beta_scale, low=0.0)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.refactor_every = check_int("refactor_every", refactor_every, minimum=1)
        self.device = torch.device(device)
        self._task: Task | None = None
        self._gram = torch.zeros(0, 0, dtype=torch.float64)  # Sigma (d, d)
        self._inverse = torch.zeros(0, 0, dtype=torch.float64)  # Sigma^-1 (d, d)
        self._moment = torch.zeros(0, dtype=torch.float64)  # sum r_s y_s (d,)
        self._theta = torch.zeros(0, dtype=torch.float64)  # theta_hat (d,)
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._pending_rounds = 0
        self.rounds_learned = 0
        self.updates = 0

    # ------------------------------------------------------------------ protocol
    def reset(self, task: Task, num_envs: int, seed: int | None = None) -> None:
        """Start from ``Sigma = lambda I``, ``theta_hat = 0``, ``C_1 = {0}``."""
        if task.embedding_dim is None:
            raise ValueError(f"BatchedEOFUL needs a task with embeddings (TLB); {task.env_id!r} has none")
        check_int("num_envs", num_envs, minimum=1)
        self._task = task
        d = task.embedding_dim
        self._gram = self.regularization * torch.eye(d, dtype=torch.float64, device=self.device)
        self._inverse = torch.eye(d, dtype=torch.float64, device=self.device) / self.regularization
        self._moment = torch.zeros(d, dtype=torch.float64, device=self.device)
        self._theta = torch.zeros(d, dtype=torch.float64, device=self.device)
        self._pending = []
        self._pending_rounds = 0
        self.rounds_learned = 0
        self.updates = 0

    def act_batch(self, observations: dict[str, Any], infos: dict[str, Any], needs_action: Any) -> Any:
        """The allowed candidate with the highest optimistic utility, per sub-env, ``(N,)``."""
        embeddings = _tensor(observations["candidate_embeddings"], self.device, torch.float64)  # (N, k, d)
        allowed = _tensor(observations["action_mask"], self.device).to(torch.bool)  # (N, k)
        scores = self.optimistic_scores(embeddings)  # (N, k)
        actions = scores.masked_fill(~allowed, float("-inf")).argmax(dim=1)  # (N,)
        if isinstance(observations["action_mask"], torch.Tensor):
            return actions.to(observations["action_mask"].device)
        return actions.cpu().numpy()

    def update_batch(self, rows: Any, observations: dict[str, Any], rewards: Any, infos: dict[str, Any]) -> None:
        """Buffer the ended rounds; once ``batch_size`` are buffered, update the ridge estimate."""
        embeddings = _tensor(infos["response_embedding"], self.device, torch.float64)  # (M, d)
        self._pending.append((embeddings, _tensor(rewards, self.device, torch.float64)))
        self._pending_rounds += int(embeddings.shape[0])
        if self._pending_rounds >= self.batch_size:
            self._learn(torch.cat([y for y, _ in self._pending]), torch.cat([r for _, r in self._pending]))
            self._pending, self._pending_rounds = [], 0

    # ------------------------------------------------------------------ math
    @property
    def beta(self) -> float:
        """beta_t of the confidence ball (eq. (3)), t = rounds learned from + 1."""
        if self._task is None:
            raise ValueError("BatchedEOFUL.beta read before reset(task, num_envs)")
        d, length = self._task.embedding_dim or 1, self._task.max_length
        t = self.rounds_learned + 1
        delta = self.delta if self.delta is not None else 1.0 / max(self._task.horizon, 2)
        radius = 2 + 4 * d * math.log(1 + t * length / d) + 8 * math.log(4 / delta)
        return self.beta_scale * self.noise_scale**2 * radius

    def optimistic_scores(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``<theta_hat, e> + sqrt(beta) ||e||_{Sigma^-1}`` for ``embeddings`` ``(N, k, d)``; ``(N, k)``."""
        if self.rounds_learned == 0:
            return torch.zeros(embeddings.shape[:2], dtype=embeddings.dtype, device=embeddings.device)  # C_1 = {0}
        mean = embeddings @ self._theta  # (N, k)
        width = ((embeddings @ self._inverse) * embeddings).sum(-1).clamp_min(0.0).sqrt()  # (N, k)
        return mean + math.sqrt(self.beta) * width

    def _learn(self, embeddings: torch.Tensor, rewards: torch.Tensor) -> None:
        """Add M rounds ``embeddings`` ``(M, d)`` with ``rewards`` ``(M,)`` to the ridge regression."""
        self._gram = self._gram + embeddings.T @ embeddings  # (d, d)
        self._moment = self._moment + embeddings.T @ rewards  # (d,)
        self.updates += 1
        if self.updates % self.refactor_every == 0:
            factor = torch.linalg.cholesky(self._gram)  # (d, d)
            self._inverse = torch.cholesky_inverse(factor)
        else:
            # Woodbury: (S + Y^T Y)^-1 = S^-1 - S^-1 Y^T (I + Y S^-1 Y^T)^-1 Y S^-1
            projected = embeddings @ self._inverse  # (M, d)
            core = torch.eye(embeddings.shape[0], dtype=torch.float64, device=self.device)
            core = core + projected @ embeddings.T  # (M, M)
            self._inverse = self._inverse - projected.T @ torch.linalg.solve(core, projected)  # (d, d)
            self._inverse = 0.5 * (self._inverse + self._inverse.T)
        self._theta = self._inverse @ self._moment  # (d,)
        self.rounds_learned += int(embeddings.shape[0])
