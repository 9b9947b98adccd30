"""Hand-made run records for store, leaderboard and report tests (no env is run)."""

from __future__ import annotations

import numpy as np

from tokenized_bandit_gym.evaluation.run_record import ARRAY_NAMES, RunRecord
from tokenized_bandit_gym.evaluation.run_spec import RunSpec


def make_record(task: str, agent: str, seed: int, regret: list[float] | np.ndarray, ms: float = 1.0) -> RunRecord:
    regret = np.asarray(regret, dtype=np.float64)
    spec = RunSpec(
        env_id=f"{task}-v0",
        env_kwargs={},
        agent=agent,
        agent_kwargs={},
        seed=seed,
        rounds=regret.size,
        task_label=task,
        agent_label=agent,
    )
    arrays = {name: np.zeros(regret.size) for name in ARRAY_NAMES}
    arrays["regret"] = regret
    arrays["optimal_utility"] = np.ones(regret.size)
    arrays["utility"] = 1.0 - regret
    arrays["wall_time"] = np.full(regret.size, ms / 1000.0)
    return RunRecord(spec=spec, arrays=arrays, metadata={"device": "cpu", "wall_time": 0.1, "package_version": "0"})
