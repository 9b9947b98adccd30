"""Make ``env.action_masks()`` callable on the outermost wrapper (sb3-contrib's MaskablePPO)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ExposeActionMasks(gym.Wrapper[Any, Any, Any, Any]):
    """Define ``action_masks()`` here, whatever wrappers lie between this one and the env.

    Gymnasium 1.x wrappers do not forward attributes, so ``wrapped.action_masks()`` raises
    ``AttributeError`` once any wrapper is applied. sb3-contrib finds the method with
    ``get_wrapper_attr`` (through ``VecEnv.env_method``), which already walks the stack; this
    wrapper serves code that calls ``env.action_masks()`` directly. If no env below defines
    ``action_masks()``, the mask is read from the last observation's ``"action_mask"`` key.

    Args:
        env: the env to wrap.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._last_mask: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env and remember the observation's mask."""
        observation, info = self.env.reset(seed=seed, options=options)
        self._remember(observation)
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the env and remember the observation's mask."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._remember(observation)
        return observation, float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Allowed actions now, ``(k,)`` bool.

        Raises:
            AttributeError: no env below defines ``action_masks()`` and no observation with an
                ``"action_mask"`` key has been seen.
        """
        try:
            masks = self.env.get_wrapper_attr("action_masks")
        except AttributeError:
            if self._last_mask is None:
                raise AttributeError(
                    "no env below defines action_masks() and no observation with an 'action_mask' key was seen"
                ) from None
            return self._last_mask.copy()
        return np.asarray(masks(), dtype=bool)

    def _remember(self, observation: Any) -> None:
        """Keep ``observation["action_mask"]`` when there is one."""
        if isinstance(observation, dict) and "action_mask" in observation:
            self._last_mask = np.asarray(observation["action_mask"], dtype=bool)
