"""Stable-Baselines3 glue: policy-ready observations, action masks, a regret-logging callback, the agent's proxy env.

``SB3Observation`` / ``TokenObservationEncoder`` encode observations for SB3 policies,
``ExposeActionMasks`` puts ``action_masks()`` on the outermost wrapper (sb3-contrib's
MaskablePPO), ``CumulativeRegretCallback`` logs regret through SB3's logger,
``log_nowhere_unless_asked`` keeps a model that logs nothing from creating an empty ``SB3-<date>``
folder in the temp dir at each ``learn()``, and ``SB3ProxyEnv`` is the env the
:mod:`~tokenized_bandit_gym.agents.sb3_agent` learner steps. Only the callback module imports
Stable-Baselines3 (on first use).
"""

from typing import Any

from tokenized_bandit_gym.adapters.sb3.action_masks import ExposeActionMasks
from tokenized_bandit_gym.adapters.sb3.observation import SB3Observation, TokenObservationEncoder

__all__ = [
    "CumulativeRegretCallback",
    "ExposeActionMasks",
    "SB3Observation",
    "TokenObservationEncoder",
    "log_nowhere_unless_asked",
]


def __getattr__(name: str) -> Any:
    """Import ``CumulativeRegretCallback`` or ``log_nowhere_unless_asked`` (and Stable-Baselines3) on first use."""
    if name in ("CumulativeRegretCallback", "log_nowhere_unless_asked"):
        from tokenized_bandit_gym.adapters.sb3 import callback

        return getattr(callback, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
