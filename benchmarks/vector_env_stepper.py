"""Steps a vector env under a uniformly random allowed action, counting token-steps.

Shared by the throughput benchmarks (``vector_env_throughput.py``, ``llm_vector_env_throughput.py``);
they import it as ``benchmarks.vector_env_stepper``, so run them from the repository root with
``PYTHONPATH=.``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from tokenized_bandit_gym.host_array import as_host_array


def random_allowed(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """A uniformly random allowed token per row, ``(N,)`` (vectorized: argmax of masked noise)."""
    scores = rng.random(masks.shape)
    return np.where(masks.astype(bool), scores, -1.0).argmax(axis=1)


class VectorEnvStepper:
    """Steps one vector env a chunk at a time; the policy's draws stay outside the timed region.

    Args:
        envs: the vector env.
        seed: seeds its reset and the random policy.
        warm: called on ``envs`` before the reset (fills the instances' cached benchmarks).
        warm_up_steps: untimed steps after the reset.
        clock: what a step is timed with (``time.perf_counter``: wall time; ``time.thread_time``:
            this thread's CPU time, which the other processes of a loaded machine do not inflate).
    """

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        seed: int,
        warm: Callable[[gym.vector.VectorEnv], None],
        warm_up_steps: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.envs = envs
        self.clock = clock
        self.rng = np.random.default_rng(seed)
        warm(envs)
        observations, _ = envs.reset(seed=seed)
        self.masks = as_host_array(observations["action_mask"])  # (N, k)
        self.autoreset = np.zeros(envs.num_envs, dtype=bool)  # (N,) rows whose next step is an autoreset
        self.run(0.0, warm_up_steps)

    def run(self, seconds: float, min_steps: int) -> float:
        """Step for at least ``seconds`` and ``min_steps``; return token-steps per second (autoresets not counted)."""
        elapsed, token_steps, steps = 0.0, 0, 0
        while steps < min_steps or elapsed < seconds:
            actions = random_allowed(self.rng, self.masks)
            start = self.clock()
            observations, _, terminated, _, _ = self.envs.step(actions)
            elapsed += self.clock() - start
            token_steps += int((~self.autoreset).sum())
            self.masks, self.autoreset = as_host_array(observations["action_mask"]), as_host_array(terminated)
            steps += 1
        return token_steps / elapsed
