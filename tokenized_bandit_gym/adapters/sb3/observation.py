"""Observations for Stable-Baselines3 policies: the encoder (one-hot tokens, one-level Dict or Box) and its wrapper."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tokenized_bandit_gym.core.validation import check_choice

TOKEN_ENCODINGS = ("one_hot", "multi_discrete")

# Keys kept by default, in this order, when the observation space has them. ``candidate_tokens`` is
# left out: it is the constant ``arange(n)`` in synthetic envs, and in LLM envs a one-hot of k ids
# over the full vocabulary is larger than a small policy can use.
DEFAULT_KEYS = ("query", "response", "length", "candidate_embeddings", "candidate_logprobs", "action_mask")

# Default selection leaves out a key whose one-hot encoding would be longer than this (token
# sequences over an LLM vocabulary): pass ``keys`` explicitly to keep it anyway.
MAX_DEFAULT_ONE_HOT = 65_536

# Token-id sequences and the key that holds how many of their entries are real (the rest is padding).
SEQUENCE_LENGTH_KEYS = {"query": "query_length", "response": "length", "candidate_tokens": None}


class TokenObservationEncoder:
    """Turn the env's flat ``Dict`` observation into what a Stable-Baselines3 policy takes.

    Token-id sequences (``query``, ``response``) become one-hot rows, ``(W, n)`` flattened to
    ``(W * n,)``, with all-zero rows at padding positions (past ``query_length`` / ``length``), so
    padding is never confused with a real EOS. ``Discrete`` counts become one-hot vectors,
    ``MultiBinary`` masks and ``Box`` features become flat float32 vectors. With
    ``token_encoding="multi_discrete"`` token ids, counts and masks keep their spaces (SB3's
    ``MultiInputPolicy`` one-hot encodes them itself; padding then reads as EOS). The result is a
    one-level ``Dict`` (for ``MultiInputPolicy``) or, with ``flatten=True``, one ``Box`` (for
    ``MlpPolicy`` and every algorithm). Keys whose space a policy cannot take (text, nested
    spaces) are dropped from the default selection, and so are keys whose one-hot encoding would
    exceed :data:`MAX_DEFAULT_ONE_HOT` entries (token ids over an LLM vocabulary).

    Args:
        observation_space: the env's observation space, a one-level ``Dict``.
        keys: keys to keep, in order; default :data:`DEFAULT_KEYS` that the space has.
        token_encoding: ``"one_hot"`` or ``"multi_discrete"``.
        flatten: concatenate everything into one float32 ``Box`` (needs ``"one_hot"``).

    Raises:
        TypeError: ``observation_space`` is not a ``Dict``.
        ValueError: an unknown or unusable key, an unknown encoding, or ``flatten`` with
            ``"multi_discrete"``.
    """

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        keys: Sequence[str] | None = None,
        token_encoding: str = "one_hot",
        flatten: bool = True,
    ) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise TypeError(f"observation_space must be a gymnasium Dict space, got {observation_space!r}")
        check_choice("token_encoding", token_encoding, TOKEN_ENCODINGS)
        if not isinstance(flatten, bool):
            raise TypeError(f"flatten must be a bool, got {flatten!r}")
        if flatten and token_encoding != "one_hot":
            raise ValueError("flatten=True needs token_encoding='one_hot' (a Box cannot hold MultiDiscrete ids)")
        self.source_space = observation_space
        self.token_encoding = token_encoding
        self.flatten = flatten
        if keys is None:
            keys = [
                key
                for key in DEFAULT_KEYS
                if key in observation_space.spaces
                and _usable(observation_space[key])
                and _one_hot_size(observation_space[key]) <= MAX_DEFAULT_ONE_HOT
            ]
        else:
            keys = list(keys)
            for key in keys:
                if key not in observation_space.spaces:
                    raise ValueError(f"key {key!r} is not in the observation space; it has {list(observation_space)}")
                if not _usable(observation_space[key]):
                    raise ValueError(f"key {key!r} has a space a policy cannot take: {observation_space[key]!r}")
        if not keys:
            raise ValueError("no usable key left to encode")
        self.keys: tuple[str, ...] = tuple(keys)
        encoded = {key: self._encoded_space(key, observation_space[key]) for key in self.keys}
        if flatten:
            boxes = [encoded[key] for key in self.keys]
            low = np.concatenate([box.low for box in boxes]).astype(np.float32)  # type: ignore[attr-defined]
            high = np.concatenate([box.high for box in boxes]).astype(np.float32)  # type: ignore[attr-defined]
            self.observation_space: spaces.Space[Any] = spaces.Box(low, high, dtype=np.float32)
        else:
            self.observation_space = spaces.Dict(encoded)

    def _encoded_space(self, key: str, space: spaces.Space[Any]) -> spaces.Space[Any]:
        """The space of one encoded key (a 1-D float32 Box under one-hot encoding)."""
        if self.token_encoding == "multi_discrete" and isinstance(space, (spaces.MultiDiscrete, spaces.Discrete)):
            return space
        if self.token_encoding == "multi_discrete" and isinstance(space, spaces.MultiBinary):
            return space
        if isinstance(space, spaces.MultiDiscrete):
            return spaces.Box(0.0, 1.0, shape=(int(np.sum(space.nvec)),), dtype=np.float32)
        if isinstance(space, spaces.Discrete):
            return spaces.Box(0.0, 1.0, shape=(int(space.n),), dtype=np.float32)
        if isinstance(space, spaces.MultiBinary):
            return spaces.Box(0.0, 1.0, shape=(int(np.prod(space.shape)),), dtype=np.float32)
        box: spaces.Box = space  # type: ignore[assignment]
        return spaces.Box(box.low.reshape(-1), box.high.reshape(-1), dtype=np.float32)

    def encode(self, observation: Mapping[str, Any]) -> np.ndarray | dict[str, np.ndarray]:
        """Encode one observation of ``source_space``.

        Returns:
            A float32 ``(D,)`` vector when ``flatten``, else a dict of the kept keys.
        """
        encoded = {key: self._encode_key(key, observation) for key in self.keys}
        if self.flatten:
            return np.concatenate([encoded[key] for key in self.keys]).astype(np.float32, copy=False)
        return encoded

    def _encode_key(self, key: str, observation: Mapping[str, Any]) -> np.ndarray:
        """Encode ``observation[key]``."""
        space = self.source_space[key]
        value = np.asarray(observation[key])
        if self.token_encoding == "multi_discrete" and isinstance(
            space, (spaces.MultiDiscrete, spaces.Discrete, spaces.MultiBinary)
        ):
            return value.astype(space.dtype, copy=True)
        if isinstance(space, spaces.MultiDiscrete):
            nvec = space.nvec.reshape(-1)  # (W,)
            ids = value.reshape(-1).astype(np.int64)  # (W,)
            length_key = SEQUENCE_LENGTH_KEYS.get(key)
            real = np.ones(ids.shape[0], dtype=bool)  # (W,)
            if length_key is not None and length_key in observation:
                real = np.arange(ids.shape[0]) < int(observation[length_key])
            if np.all(nvec == nvec[0]):
                rows = np.eye(int(nvec[0]), dtype=np.float32)[ids]  # (W, n)
                rows[~real] = 0.0
                return rows.reshape(-1)
            parts = [
                np.eye(int(size), dtype=np.float32)[i] * float(r) for size, i, r in zip(nvec, ids, real, strict=True)
            ]
            return np.concatenate(parts)
        if isinstance(space, spaces.Discrete):
            one_hot = np.zeros(int(space.n), dtype=np.float32)
            one_hot[int(value) - int(space.start)] = 1.0
            return one_hot
        return value.reshape(-1).astype(np.float32)


def _usable(space: spaces.Space[Any]) -> bool:
    """Whether a policy can take ``space`` once encoded (flat numeric spaces only)."""
    return isinstance(space, (spaces.MultiDiscrete, spaces.Discrete, spaces.MultiBinary, spaces.Box))


def _one_hot_size(space: spaces.Space[Any]) -> int:
    """Length of the one-hot (or flattened) encoding of ``space``."""
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if space.shape is None:
        raise ValueError(f"{space} has no shape, so no flat encoding")
    return int(np.prod(space.shape))


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
            (:data:`DEFAULT_KEYS`).
        token_encoding: ``"one_hot"`` or ``"multi_discrete"``.
        flatten: one ``Box`` instead of a ``Dict``.

    >>> import gymnasium as gym
    >>> import tokenized_bandit_gym
    >>> from tokenized_bandit_gym.adapters.sb3 import SB3Observation
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
