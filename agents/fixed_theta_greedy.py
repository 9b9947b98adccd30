"""Greedy decoding with a fixed (wrong) parameter: the paper's "WrongTheta" baseline."""

from __future__ import annotations

from numbers import Real
from typing import Any, cast

import numpy as np
import torch

from tokenized_bandit_gym.agents.linear_confidence import masked_argmax
from tokenized_bandit_gym.task import Task

THETA_NAMES = ("negated",)
"""theta' names resolved from the task at :meth:`FixedThetaGreedy.reset`: ``"negated"`` is ``-theta``."""


class FixedThetaGreedy:
    """At each position, the allowed candidate maximising ``<theta', e(x, y:tau)>`` for a fixed theta'.

    The paper's WrongTheta (section 6.2): with the paper's ``theta = 0.5 * 1`` it uses
    ``theta' = (-0.5, ..., -0.5)``, i.e. ``theta' = -theta``, and maximises the resulting convex
    combination ``gamma * v(p) + (1 - gamma) * <theta', e>``. That is ``theta="negated"`` (the
    default), resolved from the task when the agent is reset: on the LLM envs
    ``theta' = problem.reduced_theta(-latent_theta)`` ``= [-(1 - gamma) theta : gamma]`` (the
    latent part negated, the ``v(p)`` coordinate kept); on a TLB ``theta' = -theta``. Reading the
    task's theta makes it an oracle-informed baseline, as in the paper. It never learns. Ties go to
    the lowest index.

    Args:
        theta: ``"negated"`` (``-theta`` of the task, see above), a scalar (theta' is that value in
            every coordinate of the features) or a ``(d,)`` vector.

    Raises:
        ValueError: a name other than :data:`THETA_NAMES`, or a non-finite theta (at
            construction); ``"negated"`` on a task with no hidden theta (at :meth:`reset`).
        TypeError: a bool.
    """

    name = "fixed_theta_greedy"

    def __init__(self, theta: str | float | np.ndarray | torch.Tensor | list[float] = "negated") -> None:
        self._named: str | None = None
        self._fill: float | None = None
        self._vector: torch.Tensor | None = None
        if isinstance(theta, bool):
            raise TypeError(f"theta must be a name, a number or a vector, got {theta!r}")
        if isinstance(theta, str):
            if theta not in THETA_NAMES:
                raise ValueError(
                    f"theta={theta!r} is no theta' this agent can resolve: "
                    f"use one of {THETA_NAMES}, a number or a vector"
                )
            self._named = theta
        elif isinstance(theta, Real):
            self._fill = float(theta)
            if not np.isfinite(self._fill):
                raise ValueError(f"theta must be finite, got {theta!r}")
        else:
            vector = torch.as_tensor(np.asarray(theta, dtype=np.float64))
            if vector.dim() != 1 or not torch.isfinite(vector).all():
                raise ValueError(f"theta must be a finite scalar or 1-d vector, got {theta!r}")
            self._vector = vector
        self.theta: torch.Tensor | None = None

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Build theta' for the task's embedding dimension (``"negated"``: from the task's theta)."""
        if task.embedding_dim is None:
            raise ValueError(f"FixedThetaGreedy needs candidate embeddings; task {task.env_id!r} has none")
        if self._named is not None:
            self.theta = negated_theta(task)  # (d,)
        elif self._vector is None:
            fill = cast(float, self._fill)  # theta was a scalar
            self.theta = torch.full((task.embedding_dim,), fill, dtype=torch.float64)  # (d,)
        elif self._vector.shape[0] != task.embedding_dim:
            raise ValueError(f"theta has {self._vector.shape[0]} entries but the task has d = {task.embedding_dim}")
        else:
            self.theta = self._vector.clone()  # (d,)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The allowed candidate with the highest ``<theta', e>``."""
        if self.theta is None:
            raise ValueError("FixedThetaGreedy.act() called before reset(task)")
        embeddings = torch.as_tensor(observation["candidate_embeddings"]).to(torch.float64)  # (k, d)
        mask = torch.as_tensor(np.asarray(observation["action_mask"])).bool()  # (k,)
        scores = embeddings @ self.theta  # (k,)
        return int(masked_argmax(scores, mask))

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""


def negated_theta(task: Task) -> torch.Tensor:
    """WrongTheta's ``theta'`` ``(d,)`` float64 on the host: ``-theta`` in the task's feature coordinates.

    LLM envs (``[e : v(p)]`` features): ``problem.reduced_theta(-latent_theta)``, the latent part
    negated and the ``v(p)`` weight ``gamma`` kept; TLB envs: ``-problem.theta``.

    Raises:
        ValueError: the task's problem has no hidden theta of the features' dimension.
    """
    problem = task.problem
    latent = getattr(problem, "latent_theta", None)
    if latent is not None and hasattr(problem, "reduced_theta"):
        wrong = problem.reduced_theta(-latent)
    else:
        theta = getattr(problem, "theta", None)
        if not isinstance(theta, torch.Tensor):
            raise ValueError(f"theta='negated' needs a task with a hidden theta; task {task.env_id!r} has none")
        wrong = -theta
    wrong = wrong.detach().to("cpu", torch.float64)
    if wrong.shape != (task.embedding_dim,):
        raise ValueError(
            f"theta='negated': the task's theta has shape {tuple(wrong.shape)}, "
            f"not its features' ({task.embedding_dim},)"
        )
    return wrong
