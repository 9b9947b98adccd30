"""Gymnasium wrappers: regret statistics, the action mask under another key.

The Stable-Baselines3 glue is in :mod:`tokenized_bandit_gym.adapters.sb3`.
"""

import importlib
import warnings
from typing import Any

from tokenized_bandit_gym.wrappers.action_mask_alias import ActionMaskAlias
from tokenized_bandit_gym.wrappers.regret_statistics import RegretStatistics

__all__ = ["ActionMaskAlias", "RegretStatistics"]

# Names that moved to tokenized_bandit_gym.adapters.sb3 (deprecated here, removed in 0.3).
_MOVED_TO_SB3 = ("ExposeActionMasks", "SB3Observation", "TokenObservationEncoder")


def __getattr__(name: str) -> Any:
    """Deprecated names: the SB3 glue that moved to ``adapters.sb3``, and ``PadResponseInfo``.

    ``PadResponseInfo`` is a pass-through now: every env's infos have fixed shapes.
    """
    if name in _MOVED_TO_SB3:
        warnings.warn(
            f"tokenized_bandit_gym.wrappers.{name} is deprecated: import it from tokenized_bandit_gym.adapters.sb3",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("tokenized_bandit_gym.adapters.sb3"), name)
    if name == "PadResponseInfo":
        import gymnasium as gym

        warnings.warn(
            "PadResponseInfo is deprecated and does nothing: info['response'] is padded to L with "
            "info['response_length'] beside it, so Gymnasium's vector envs need no wrapper",
            DeprecationWarning,
            stacklevel=2,
        )
        return gym.Wrapper
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
