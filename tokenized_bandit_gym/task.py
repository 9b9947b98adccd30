"""What an agent is told about the task it will play (docs/AGENTS.md; docs/ARCHITECTURE.md, "How to add an agent")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from tokenized_bandit_gym.core.tokenized_problem import TokenizedBanditProblem


@dataclass(frozen=True)
class Task:
    """The public description of a token task, handed to ``Agent.reset``.

    Attributes:
        env_id: the registered id, if the env was made from one.
        vocab_size: n, the number of token ids.
        num_candidates: k, the size of the action space (k = n for synthetic envs).
        max_length: L.
        eos_token_id: the EOS id.
        embedding_dim: d, or None when the task has no features (TMAB).
        horizon: T, the number of rounds the agent will play (explore-then-commit needs it).
        observation_space: the env's observation space.
        action_space: the env's action space, ``Discrete(k)``.
        problem: the instance. Its embedding oracle (``problem.embed``) is public; only oracle
            baselines may read its hidden parameters, and they say so.
        feedback: the env's feedback channel, ``"scalar"`` (reward ``u + eta``) or ``"pairwise"``
            (two responses a round, reward a Bradley-Terry comparison); an agent learns from the
            channels its ``feedback_channels`` names (see :func:`~tokenized_bandit_gym.agent.check_feedback`).
    """

    env_id: str | None
    vocab_size: int
    num_candidates: int
    max_length: int
    eos_token_id: int
    embedding_dim: int | None
    horizon: int
    observation_space: gym.Space[Any]
    action_space: gym.spaces.Discrete
    problem: TokenizedBanditProblem[Any]
    feedback: str = "scalar"

    @classmethod
    def from_env(cls, env: gym.Env[Any, Any], horizon: int) -> Task:
        """Describe ``env`` (wrapped or not) for an agent that will play ``horizon`` rounds."""
        check_horizon(horizon)
        base = env.unwrapped
        problem: TokenizedBanditProblem[Any] | None = getattr(base, "problem", None)
        if problem is None:
            raise TypeError(f"{base!r} is not a tokenized bandit env (it has no .problem)")
        action_space = env.action_space
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"{base!r} is not a tokenized bandit env (its actions are {action_space}, not Discrete)")
        return cls.of_problem(problem, env.spec, base, env.observation_space, action_space, horizon)

    @classmethod
    def of_problem(
        cls,
        problem: TokenizedBanditProblem[Any],
        spec: EnvSpec | None,
        base: object,
        observation_space: gym.Space[Any],
        action_space: gym.spaces.Discrete,
        horizon: int,
    ) -> Task:
        """The task of an env of ``problem`` whose (single) spaces are these, ``horizon`` rounds long.

        Args:
            problem: the env's instance.
            spec: the env's spec (its id is the task's), or None.
            base: the unwrapped env, whose ``feedback`` (``"scalar"`` when it has none) is the task's.
            observation_space: one round's observation space (a vector env's single one).
            action_space: one round's action space, ``Discrete(k)``.
            horizon: T, checked by the caller (:func:`check_horizon`).
        """
        return cls(
            env_id=spec.id if spec is not None else None,
            vocab_size=problem.vocab_size,
            num_candidates=int(action_space.n),
            max_length=problem.max_length,
            eos_token_id=problem.eos_token_id,
            embedding_dim=problem.embedding_dim,
            horizon=horizon,
            observation_space=observation_space,
            action_space=action_space,
            problem=problem,
            feedback=getattr(base, "feedback", "scalar"),
        )


def check_horizon(horizon: int) -> None:
    """Refuse a ``horizon`` that is not a positive integer (a bool included).

    Raises:
        ValueError: naming ``horizon``.
    """
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
