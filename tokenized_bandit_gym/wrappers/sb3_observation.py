"""Observation wrapper giving Stable-Baselines3 policies what they can take."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from tokenized_bandit_gym.wrappers.token_observation_encoder import TokenObservationEncoder


class SB3Observation(gym.ObservationWrapper[Any, Any, Any]):
    """Encode observations with :class:`TokenObservationEncoder` (one-hot tokens, flat Box or Dict).

    ``flatten=True`` (default) gives one float32 ``Box`` for ``MlpPolicy`` (PPO, A2C, DQN,
    MaskablePPO, RecurrentPPO); ``flatten=False`` a one-level ``Dict`` for ``MultiInputPolicy``.
    The action mask stays reachable: the base env's ``action_masks()`` is found through this
    wrapper by ``env.get_wrapper_attr("action_masks")`` (what SB3's ``VecEnv.env_method`` uses),
    and this wrapper also defines ``action_masks()`` itself.

    Args:
        env: a tokenized bandit env (wrapped or not).
        keys: observation keys to keep; default those a policy can use
            (:data:`~tokenized_bandit_gym.wrappers.token_observation_encoder.DEFAULT_KEYS`).
        token_encoding: ``"one_hot"`` or ``"multi_discrete"``.
        flatten: one ``Box`` instead of a ``Dict``.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> from tokenized_bandit_gym.wrappers import SB3Observation
    >>> env = SB3Observation(gym.make("TokenizedMultiArmedBandit-v0"))
    >>> env.observation_space.shape  # one-hot query (1 * 8) and response (6 * 8), length (7), mask (8)
    (71,)
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        keys: Sequence[str] | None = None,
        token_encoding: str = "one_hot",
        flatten: bool = True,
    ) -> None:
        super().__init__(env)
        self.encoder = TokenObservationEncoder(env.observation_space, keys, token_encoding, flatten)
        self.observation_space = self.encoder.observation_space

    def observation(self, observation: Any) -> np.ndarray | dict[str, np.ndarray]:
        """Encode one observation."""
        return self.encoder.encode(observation)

    def action_masks(self) -> np.ndarray:
        """Allowed actions now, ``(k,)`` bool, from the wrapped env."""
        return np.asarray(self.env.get_wrapper_attr("action_masks")(), dtype=bool)
