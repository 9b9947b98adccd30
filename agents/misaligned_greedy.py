"""Greedy decoding on the LM's probability alone: the paper's "Misaligned greedy" baseline (section 6)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenized_bandit_gym.agents.linear_confidence import masked_argmax
from tokenized_bandit_gym.task import Task


class MisalignedGreedy:
    """At each position, the allowed candidate with the highest LM log-probability ``log p(tau | x, y)``.

    The baseline of the paper's section 6 ("Misaligned greedy that simply performs greedy
    decoding with respect to the LLM's probability"): it ignores the user's latent utility, so
    its regret grows linearly whenever ``gamma < 1``. Reads only ``candidate_logprobs`` from the
    observation (LLM envs); never learns. Ties go to the lowest index.
    """

    name = "misaligned_greedy"
    feedback_channels = ("scalar", "pairwise")  # it does not learn: any channel

    def reset(self, task: Task, seed: int | None = None) -> None:
        """Check that the task shows candidate log-probs.

        Raises:
            ValueError: the observation space has no ``candidate_logprobs`` (not an LLM env, or
                ``TokenizedDecoding-v0`` without ``observe_logprobs=True``).
        """
        spaces = getattr(task.observation_space, "spaces", {})
        if "candidate_logprobs" not in spaces:
            raise ValueError(
                "MisalignedGreedy needs observation['candidate_logprobs'] (an LLM env with log-probs observed)"
            )

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The allowed candidate with the highest LM log-probability."""
        if "candidate_logprobs" not in observation:
            raise ValueError("MisalignedGreedy needs observation['candidate_logprobs']")
        scores = np.asarray(observation["candidate_logprobs"], dtype=np.float64)  # (k,)
        allowed = np.asarray(observation["action_mask"], dtype=bool)  # (k,)
        return int(masked_argmax(scores, allowed))

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Nothing to learn."""
