"""Pad ``info["response"]`` to L tokens, so Gymnasium's ``SyncVectorEnv`` can stack it."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class PadResponseInfo(gym.Wrapper[Any, Any, Any, Any]):
    """Pad the finished round's ``info["response"]`` with EOS to ``(L,)`` int64.

    A single env reports the response of a finished round with its own length (``(m,)``, m <= L).
    Gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` stack an array-valued info key into an
    ``(N, *shape)`` array sized by the first sub-env that reports it, so two rounds of different
    lengths ending in the same step raise ``ValueError: could not broadcast``. With this wrapper
    every response is ``(L,)``, padded with EOS past its length exactly as the native vector
    env's ``info["response"]`` and the observation's ``"response"`` are; the terminal
    observation's ``"length"`` still gives the true length.

    Use it per sub-env: ``gym.make_vec(env_id, num_envs, vectorization_mode="sync",
    wrappers=[PadResponseInfo])``. The native vector env (the default ``gym.make_vec``) needs
    nothing.

    Args:
        env: a tokenized bandit env (its ``unwrapped`` has ``problem.max_length`` and
            ``eos_token_id``).
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._max_length = int(env.unwrapped.problem.max_length)  # type: ignore[attr-defined]
        self._eos_token_id = int(env.unwrapped.eos_token_id)  # type: ignore[attr-defined]

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env; a finished round's ``info["response"]`` comes back as ``(L,)`` int64."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        if "response" in info:
            response = np.asarray(info["response"], dtype=np.int64)  # (m,)
            padded = np.full(self._max_length, self._eos_token_id, dtype=np.int64)  # (L,)
            padded[: response.shape[0]] = response
            info["response"] = padded
        return observation, reward, terminated, truncated, info
