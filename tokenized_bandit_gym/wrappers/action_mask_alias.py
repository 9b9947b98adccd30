"""The action mask under the key another library reads it from (Tianshou's ``obs.mask``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces


class ActionMaskAlias(gym.ObservationWrapper[dict[str, Any], Any, dict[str, Any]]):
    """Add a copy of ``observation["action_mask"]`` under ``key`` (default ``"mask"``, what Tianshou reads).

    Tianshou's DQN family masks its Q-values and its epsilon-greedy exploration with
    ``batch.obs.mask``; without it a Tianshou agent ignores ``action_mask`` and plays masked
    tokens, which become the forced EOS at position L (or raise earlier). The copy is the
    ``(k,)`` int8 ``MultiBinary`` mask itself (1 = allowed), as its space says; the other keys are
    untouched.

    Args:
        env: a tokenized bandit env (one round, not a vector env).
        key: the observation key to add; must not be a key the observation already has.

    Raises:
        ValueError: the observation has no ``action_mask``, or already has ``key``.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> env = ActionMaskAlias(gym.make("TokenizedMultiArmedBandit-v0"))
    >>> observation, _ = env.reset(seed=0)
    >>> bool((observation["mask"] == observation["action_mask"]).all())
    True
    """

    def __init__(self, env: gym.Env[dict[str, Any], Any], key: str = "mask") -> None:
        super().__init__(env)
        observation_space = env.observation_space
        if not isinstance(observation_space, spaces.Dict) or "action_mask" not in observation_space.spaces:
            raise ValueError(f"the env's observations have no 'action_mask': {observation_space}")
        if not isinstance(key, str) or key in observation_space.spaces:
            raise ValueError(f"key must be a new observation key, got {key!r} (keys: {list(observation_space.spaces)})")
        self.key = key
        self.observation_space = spaces.Dict({**observation_space.spaces, key: observation_space["action_mask"]})

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """``observation`` with ``observation[key]``, a copy of its ``(k,)`` action mask."""
        return {**observation, self.key: observation["action_mask"].copy()}
