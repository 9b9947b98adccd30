"""One leaderboard run: a task, an agent, a seed and a number of rounds, with its stable key."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one run's results (and, beside it, how to display it).

    The key hashes only what determines the results (env id and kwargs, agent name and kwargs,
    seed, rounds), so renaming a label never reruns anything and a rerun of the same spec finds
    every finished run by its key.

    Attributes:
        env_id: a registered Gymnasium id.
        env_kwargs: keyword arguments of ``gym.make``.
        agent: a registered agent name (``tokenized_bandit_gym.agents.list_agents()``) or ``"package.module:Class"``.
        agent_kwargs: keyword arguments of ``tokenized_bandit_gym.agents.make``.
        seed: seeds the env's query and noise streams and the agent.
        rounds: T, the number of rounds (episodes).
        task_label: display name of the task.
        agent_label: display name of the agent.
    """

    env_id: str
    env_kwargs: dict[str, Any]
    agent: str
    agent_kwargs: dict[str, Any]
    seed: int
    rounds: int
    task_label: str = field(default="", compare=False)
    agent_label: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """SHA-256 (hex) of the canonical JSON of what determines the results."""
        identity = {
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "agent": self.agent,
            "agent_kwargs": self.agent_kwargs,
            "seed": self.seed,
            "rounds": self.rounds,
        }
        return hashlib.sha256(canonical_json(identity).encode()).hexdigest()
