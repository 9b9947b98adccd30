"""Per-round record of one agent playing one task online."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass
class OnlineResult:
    """Arrays of length T, one entry per round.

    Attributes:
        regret: ``optimal_utility - utility`` per round.
        utility: noise-free utility of the agent's response.
        optimal_utility: the benchmark's utility (exact optimum for synthetic tasks).
        oracle_greedy_utility: greedy decoding with the true utility.
        reward: the noisy reward the agent received.
        wall_time: seconds per round (agent and env together).
        metadata: free-form description (env id, agent name, seed, ...).
    """

    regret: npt.NDArray[np.float64]
    utility: npt.NDArray[np.float64]
    optimal_utility: npt.NDArray[np.float64]
    oracle_greedy_utility: npt.NDArray[np.float64]
    reward: npt.NDArray[np.float64]
    wall_time: npt.NDArray[np.float64]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        """T, the number of rounds played."""
        return int(self.regret.shape[0])

    @property
    def cumulative_regret(self) -> npt.NDArray[np.float64]:
        """``sum_{s <= t} regret_s``, ``(T,)``."""
        return np.cumsum(self.regret)

    @property
    def greedy_gap(self) -> npt.NDArray[np.float64]:
        """``optimal_utility - oracle_greedy_utility`` per round: the floor of greedy agents."""
        return self.optimal_utility - self.oracle_greedy_utility
