"""The env an SB3 learner sees inside :class:`~tokenized_bandit_gym.agents.sb3_agent.SB3Agent`, fed through queues."""

from __future__ import annotations

import queue
from typing import Any

import gymnasium as gym
import numpy as np


class ProxyClosed(Exception):
    """Raised inside the learner's ``reset``/``step`` to unwind ``learn()`` when the agent closes."""


class SB3ProxyEnv(gym.Env[Any, np.int64]):
    """A Gymnasium env whose observations come from the caller, one message at a time.

    SB3's ``learn()`` drives its own env loop; here it runs in a worker thread and this env
    hands each of its calls over to the thread that plays the real env (the run loop calling
    ``act``/``update``), strictly in turn: the learner posts a message on ``outbox`` and blocks
    on ``inbox`` until the player answers, and the player blocks while the learner works. So
    exactly one of the two threads runs at any time and the order of every computation is
    fixed.

    Messages to the player (``outbox``): ``("ready", None)`` when ``reset`` waits for the next
    round's first observation, ``("action", a)`` when ``step(a)`` waits for the outcome.
    Messages from the player (``inbox``): ``("reset", (observation, mask, info))``,
    ``("step", (observation, mask, reward, terminated, info))`` and ``("close", None)``, which
    makes ``reset``/``step`` raise :class:`ProxyClosed`.

    Args:
        observation_space: the encoded observation space the policy takes.
        action_space: the task's ``Discrete(k)``.
        inbox: messages from the player.
        outbox: messages to the player.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.spaces.Discrete,
        inbox: queue.Queue[tuple[str, Any]],
        outbox: queue.Queue[tuple[str, Any]],
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self._inbox = inbox
        self._outbox = outbox
        self._mask = np.ones(int(action_space.n), dtype=np.bool_)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Wait for the first observation of the next round (``seed`` is ignored: the real env is seeded)."""
        self._outbox.put(("ready", None))
        observation, self._mask, info = self._receive("reset")
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Hand ``action`` to the player and wait for the real env's answer."""
        self._outbox.put(("action", int(action)))
        observation, self._mask, reward, terminated, info = self._receive("step")
        return observation, float(reward), bool(terminated), False, info

    def action_masks(self) -> np.ndarray:
        """The mask of the last observation, ``(k,)`` bool (sb3-contrib's MaskablePPO reads it)."""
        return self._mask.copy()

    def _receive(self, expected: str) -> Any:
        """The payload of the next message, which must be ``expected`` or ``"close"``."""
        kind, payload = self._inbox.get()
        if kind == "close":
            raise ProxyClosed
        if kind != expected:
            raise ValueError(f"the SB3 learner expected a {expected!r} message, got {kind!r}")
        return payload
