"""Gymnasium wrappers: policy-ready observations, action masks for SB3, regret statistics."""

import warnings
from typing import Any

from tokenized_bandit_gym.wrappers.expose_action_masks import ExposeActionMasks
from tokenized_bandit_gym.wrappers.regret_statistics import RegretStatistics
from tokenized_bandit_gym.wrappers.sb3_observation import SB3Observation
from tokenized_bandit_gym.wrappers.token_observation_encoder import TokenObservationEncoder

__all__ = ["ExposeActionMasks", "RegretStatistics", "SB3Observation", "TokenObservationEncoder"]


def __getattr__(name: str) -> Any:
    """``PadResponseInfo`` (deprecated): every env's infos now have fixed shapes, so it is a pass-through."""
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
