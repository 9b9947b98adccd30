"""Deprecated location of :class:`~tokenized_bandit_gym.adapters.sb3.CumulativeRegretCallback` (removed in 0.3)."""

import warnings

from tokenized_bandit_gym.adapters.sb3.callback import CumulativeRegretCallback

warnings.warn(
    "tokenized_bandit_gym.adapters.cumulative_regret_callback is deprecated: import CumulativeRegretCallback "
    "from tokenized_bandit_gym.adapters.sb3",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["CumulativeRegretCallback"]
