"""The outcome of one finished run: its spec, its per-round arrays and where it ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenized_bandit_gym.evaluation.run_spec import RunSpec

# Per-round arrays every run stores, each (T,) float64 (the columns of OnlineResult).
ARRAY_NAMES = ("regret", "utility", "optimal_utility", "oracle_greedy_utility", "reward", "wall_time")

# The arrays that the seeds determine (wall_time does not): equal seeds give equal bytes.
DETERMINISTIC_ARRAYS = ARRAY_NAMES[:-1]


@dataclass
class RunRecord:
    """One finished run.

    Attributes:
        spec: what was run.
        arrays: ``name -> (T,) float64`` for every name in ``ARRAY_NAMES``.
        metadata: environment of the run: ``package_version``, ``git_commit``, ``torch_version``,
            ``transformers_version``, ``python_version``, ``platform``, ``device``, ``benchmark`` (the
            env's ``optimal_kind``: ``"exact"``, ``"oracle_greedy"`` or ``"oracle_beam"``; absent on older runs),
            ``wall_time`` (seconds, whole run), ``started_at`` and ``finished_at`` (UTC, ISO 8601).
    """

    spec: RunSpec
    arrays: dict[str, np.ndarray]
    metadata: dict[str, Any]

    def __post_init__(self) -> None:
        missing = [name for name in ARRAY_NAMES if name not in self.arrays]
        if missing:
            raise ValueError(f"RunRecord.arrays lacks {missing}; it has {sorted(self.arrays)}")
        for name in ARRAY_NAMES:
            array = np.asarray(self.arrays[name], dtype=np.float64)
            if array.shape != (self.spec.rounds,):
                raise ValueError(f"RunRecord.arrays[{name!r}] has shape {array.shape}, expected ({self.spec.rounds},)")
            self.arrays[name] = array

    @property
    def final_regret(self) -> float:
        """Cumulative regret after the last round."""
        return float(self.arrays["regret"].sum())
