"""Run N independent copies of any per-round agent, one per sub-env of a vector env."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.agent import Agent, check_feedback
from tokenized_bandit_gym.task import Task


def _host(value: Any) -> Any:
    """A tensor as a NumPy array (anything else unchanged)."""
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else value


def _python(value: Any) -> Any:
    """NumPy scalars as Python scalars, as the single env puts them in ``info``."""
    return value.item() if isinstance(value, np.generic) else value


class IndependentAgents:
    """A :class:`~tokenized_bandit_gym.batched_agent.BatchedAgent` made of N per-round agents.

    Copy i plays sub-env i only and sees exactly what it would see on a single env: the
    sub-env's row of the observation, an ``info`` dict holding the row's valid entries as
    Python scalars (``response`` trimmed to the round's length), and ``update`` once per round.
    With ``reset(task, N, seed)`` copy i is reset with ``seed + i`` (the seed sub-env i gets
    from ``vector_env.reset(seed=seed)``) and the run's task unchanged: its horizon T is the
    only safe bound on the rounds one copy plays (sub-envs with shorter rounds play more of
    them), and agents that stop at their horizon (SB3 learners) must not run out. Agents that
    tune on the horizon (explore-then-commit) therefore plan for T rounds, not about T / N.
    So every :class:`~tokenized_bandit_gym.agent.Agent` runs on a vector env; sharing nothing
    between copies, it learns N times slower per round than a batched learner would.

    The copies are called in a Python loop over sub-envs: this adapter is for coverage and
    reference, not speed.

    Args:
        agent_factory: builds one fresh agent per sub-env (e.g. ``lambda: tokenized_bandit_gym.agents.make("random")``).
    """

    def __init__(self, agent_factory: Callable[[], Agent]) -> None:
        if not callable(agent_factory):
            raise TypeError(f"agent_factory must be callable and return an Agent, got {agent_factory!r}")
        self._factory = agent_factory
        self.agents: list[Agent] = []
        self.name = "independent"

    def reset(self, task: Task, num_envs: int, seed: int | None = None) -> None:
        """Build and reset N copies on ``task``; copy i gets ``seed + i``."""
        self.agents = [self._factory() for _ in range(num_envs)]
        self.name = f"independent[{getattr(self.agents[0], 'name', type(self.agents[0]).__name__)}]"
        check_feedback(self.agents[0], task)
        for row, agent in enumerate(self.agents):
            agent.reset(task, None if seed is None else seed + row)

    def act_batch(
        self,
        observations: dict[str, np.ndarray] | dict[str, torch.Tensor],
        infos: dict[str, Any],
        needs_action: np.ndarray | torch.Tensor,
    ) -> np.ndarray:
        """Ask copy i for its action on every row that needs one (0 elsewhere)."""
        host_observations = {key: _host(value) for key, value in observations.items()}
        infos = {key: _host(value) for key, value in infos.items()}
        actions = np.zeros(len(self.agents), dtype=np.int64)
        for row in np.flatnonzero(_host(needs_action)):
            info = {
                key: _python(value[row]) if not isinstance(value, str) else value
                for key, value in infos.items()
                if not key.startswith("_") and bool(infos[f"_{key}"][row])
            }
            actions[row] = self.agents[row].act({key: value[row] for key, value in host_observations.items()}, info)
        return actions

    def update_batch(
        self,
        rows: np.ndarray | torch.Tensor,
        observations: dict[str, np.ndarray] | dict[str, torch.Tensor],
        rewards: np.ndarray | torch.Tensor,
        infos: dict[str, Any],
    ) -> None:
        """Give each finished round to its copy, as the single env's last step would."""
        host_observations = {key: _host(value) for key, value in observations.items()}
        infos = {key: _host(value) for key, value in infos.items()}
        host_rewards = _host(rewards)
        for index, row in enumerate(_host(rows).tolist()):
            observation = {key: value[index] for key, value in host_observations.items()}
            info = {key: value if isinstance(value, str) else _python(value[index]) for key, value in infos.items()}
            self.agents[row].update(observation, float(host_rewards[index]), info)
