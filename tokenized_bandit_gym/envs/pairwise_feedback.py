"""The feedback channel of a round: the scalar reward (the paper's) or a pairwise comparison (Bradley-Terry).

``feedback="scalar"`` is the paper's protocol: one response per round, reward ``u(x_t, y_t) + eta_t``.
``feedback="pairwise"`` is preference feedback as users give it: a round holds two responses to
the same query, decoded **one after the other in the same episode**, and its reward is one
comparison, drawn from the Bradley-Terry model::

    P(first preferred) = sigma((u1 - u2) / tau),   tau = preference_temperature > 0

The episode's final reward is the preference bit (1.0 when the first response is preferred, else
0.0). Why sequential rather than lockstep (one ``MultiDiscrete([k, k])`` action per step, as
T-POP decodes): the action stays ``Discrete(k)`` with its ``MultiBinary(k)`` action mask and the
forced EOS at position L, so the env contract, sb3-contrib's masking, SB3's and Gymnasium's
checkers and the vector env's round batch apply unchanged (a second response is one more
restart of a row on the same query); two responses of different lengths need no padding
action; and the second response can depend on the first, which the observation shows
(``first_response``, ``first_length``), as the dueling agents need (the second arm of MaxInP /
CoLSTIM / T-POP is chosen relative to the first).

The randomness of the comparison comes from the round's noise stream, so agents with the same
seed see the same comparison noise (common random numbers): under pairwise feedback that stream
draws ``eta_t ~ U[-1, 1]`` (``noise`` and ``noise_scale`` are not used) and the first response is
preferred when ``(eta_t + 1) / 2 < sigma((u1 - u2) / tau)``. The last info then holds
``utilities`` ``(2,)`` (u1, u2), ``preferred`` (the index of the preferred response: 0 for the
first, 1 for the second, so the reward is ``1 - preferred``), ``utility = (u1 + u2) / 2``,
``regret = u* - (u1 + u2) / 2`` (the standard dueling regret), ``regret_weak = u* - max(u1, u2)``
and ``noise = reward - sigma((u1 - u2) / tau)`` (the comparison's zero-mean noise); ``response``,
``response_length`` and ``response_embedding`` are the second response's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.core.noise_model import NoiseModel
from tokenized_bandit_gym.core.validation import check_real

FEEDBACK_CHANNELS = ("scalar", "pairwise")
COMPARISON_NOISE = NoiseModel("bounded", 1.0)
"""What the noise stream draws under pairwise feedback: ``U[-1, 1]``, mapped to the comparison's uniform."""


@dataclass(frozen=True)
class FeedbackChannel:
    """The feedback channel of an env, validated.

    Attributes:
        kind: ``"scalar"`` (one response, reward ``u + eta``) or ``"pairwise"`` (two responses,
            reward the Bradley-Terry preference bit).
        temperature: tau > 0, finite (read under pairwise feedback only).

    Raises:
        ValueError: an unknown ``kind``, or a ``temperature`` that is not positive and finite.
        TypeError: ``kind`` not a string or ``temperature`` not a real number.
    """

    kind: str = "scalar"
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str):
            raise TypeError(f"feedback must be one of {FEEDBACK_CHANNELS}, got {self.kind!r}")
        if self.kind not in FEEDBACK_CHANNELS:
            raise ValueError(f"feedback must be one of {FEEDBACK_CHANNELS}, got {self.kind!r}")
        if check_real("preference_temperature", self.temperature) <= 0.0:  # NaN and inf are refused there
            raise ValueError(f"preference_temperature must be positive and finite, got {self.temperature!r}")

    @property
    def pairwise(self) -> bool:
        """Whether a round holds two responses and a comparison."""
        return self.kind == "pairwise"

    def noise_model(self, noise: str, noise_scale: float) -> NoiseModel:
        """The noise model of the round's noise stream: the scalar reward's, or the comparison's ``U[-1, 1]``.

        ``noise`` and ``noise_scale`` are validated either way.
        """
        scalar = NoiseModel(noise, noise_scale)
        return COMPARISON_NOISE if self.pairwise else scalar


def preference_outcome(
    first_utility: Any, second_utility: Any, optimal_utility: Any, uniform_noise: Any, temperature: float
) -> dict[str, Any]:
    """The comparison of a round (one round, or N rows of NumPy arrays or tensors alike).

    Args:
        first_utility: u1, ``()`` or ``(N,)``.
        second_utility: u2.
        optimal_utility: u*, the round's benchmark.
        uniform_noise: the round's ``eta ~ U[-1, 1]``; the first is preferred when ``(eta + 1) / 2 < P``.
        temperature: tau > 0.

    Returns:
        ``utility`` (``(u1 + u2) / 2``), ``regret`` (``u* - (u1 + u2) / 2``), ``regret_weak``
        (``u* - max(u1, u2)``), ``utilities`` (``(..., 2)``), ``preferred`` (int64: 0 first, 1
        second), ``reward`` (``1 - preferred`` as float64) and ``noise`` (``reward - P``), with
        ``P = sigma((u1 - u2) / tau)`` (Bradley-Terry).
    """
    utilities: torch.Tensor | np.ndarray
    if isinstance(first_utility, torch.Tensor):
        probability = torch.sigmoid((first_utility - second_utility) / temperature)  # (N,)
        first_preferred = (uniform_noise + 1.0) / 2.0 < probability  # (N,)
        utilities = torch.stack([first_utility, second_utility], dim=-1)  # (N, 2)
        best = torch.maximum(first_utility, second_utility)  # (N,)
        reward = first_preferred.to(torch.float64)  # (N,)
        preferred = (~first_preferred).to(torch.int64)  # (N,)
    else:
        first_utility, second_utility = np.asarray(first_utility, np.float64), np.asarray(second_utility, np.float64)
        margin = (first_utility - second_utility) / temperature
        probability = np.exp(-np.logaddexp(0.0, -margin))  # sigma(margin), no overflow
        first_wins = (np.asarray(uniform_noise, np.float64) + 1.0) / 2.0 < probability
        utilities = np.stack([first_utility, second_utility], axis=-1)  # (..., 2)
        best = np.maximum(first_utility, second_utility)
        reward = first_wins.astype(np.float64)
        preferred = (~first_wins).astype(np.int64)
    mean = (first_utility + second_utility) / 2.0
    return {
        "utility": mean,
        "regret": optimal_utility - mean,
        "regret_weak": optimal_utility - best,
        "utilities": utilities,
        "preferred": preferred,
        "reward": reward,
        "noise": reward - probability,
    }


class PairwiseRound:
    """The first response of one round under pairwise feedback, for the one-round shells (the single envs).

    Attributes:
        response: ``(L,)`` int64 the first response, padded with EOS (all EOS while it is decoded).
        length: its length (0 while it is decoded: a complete response has at least one token).
        utility: its noise-free utility.
    """

    def __init__(self, max_length: int, eos_token_id: int, temperature: float) -> None:
        self.eos_token_id = eos_token_id
        self.temperature = temperature
        self.response = np.full(max_length, eos_token_id, dtype=np.int64)
        self.length = 0
        self.utility = 0.0

    @property
    def deciding_second(self) -> bool:
        """Whether the round's second response is being decoded."""
        return self.length > 0

    def start(self) -> None:
        """A new round: no first response yet."""
        self.response.fill(self.eos_token_id)
        self.length = 0
        self.utility = 0.0

    def keep_first(self, summary: dict[str, Any]) -> None:
        """Keep the first response of the round summary ``summary`` (one-round form)."""
        self.response[:] = summary["response"]
        self.length = int(summary["response_length"])
        self.utility = float(summary["utility"])

    def finish(self, summary: dict[str, Any], uniform_noise: float) -> tuple[float, dict[str, Any]]:
        """The round's reward (the preference bit) and its summary with the comparison's entries.

        Args:
            summary: the second response's round summary (one-round form).
            uniform_noise: the round's ``eta ~ U[-1, 1]``.
        """
        outcome = preference_outcome(
            self.utility, summary["utility"], summary["optimal_utility"], uniform_noise, self.temperature
        )
        reward = float(outcome.pop("reward"))
        for key in ("utility", "regret", "regret_weak", "noise"):
            summary[key] = float(outcome[key])
        summary["utilities"] = outcome["utilities"]
        summary["preferred"] = int(outcome["preferred"])
        return reward, summary

    def observation(self, observed: dict[str, Any]) -> dict[str, Any]:
        """``observed`` with ``first_response`` and ``first_length`` (copies), in the space's key order."""
        return with_first_response(observed, self.response.copy(), np.int64(self.length))


class PairwiseRows:
    """The first responses of N rows under pairwise feedback, for the native vector env (NumPy or torch rows).

    Attributes:
        response: ``(N, L)`` int64, padded with EOS.
        length: ``(N,)`` int64 (0 while the first response is decoded).
        utility: ``(N,)`` float64.
    """

    def __init__(
        self, num_rows: int, max_length: int, eos_token_id: int, temperature: float, device: torch.device | None
    ) -> None:
        self.eos_token_id = eos_token_id
        self.temperature = temperature
        self.on_host = device is None
        if device is None:
            self.response: Any = np.full((num_rows, max_length), eos_token_id, dtype=np.int64)
            self.length: Any = np.zeros(num_rows, dtype=np.int64)
            self.utility: Any = np.zeros(num_rows)
        else:
            self.response = torch.full((num_rows, max_length), eos_token_id, dtype=torch.int64, device=device)
            self.length = torch.zeros(num_rows, dtype=torch.int64, device=device)
            self.utility = torch.zeros(num_rows, dtype=torch.float64, device=device)

    @property
    def deciding_second(self) -> Any:
        """``(N,)`` bool: the rows decoding their second response."""
        return self.length > 0

    def start(self, rows: Any) -> None:
        """New rounds on ``rows`` ``(N,)`` bool: no first response yet."""
        if self.on_host:
            self.response[rows] = self.eos_token_id
            self.length[rows] = 0
            self.utility[rows] = 0.0
        else:
            self.response = self.response.masked_fill(rows[:, None], self.eos_token_id)
            self.length = self.length.masked_fill(rows, 0)
            self.utility = self.utility.masked_fill(rows, 0.0)

    def keep_first(self, rows: Any, summary: dict[str, Any]) -> None:
        """Keep the first responses of ``rows`` ``(N,)`` bool from the round summary ``summary`` (N rows)."""
        if self.on_host:
            self.response[rows] = summary["response"][rows]
            self.length[rows] = summary["response_length"][rows]
            self.utility[rows] = summary["utility"][rows]
        else:
            self.response = torch.where(rows[:, None], summary["response"], self.response)
            self.length = torch.where(rows, summary["response_length"], self.length)
            self.utility = torch.where(rows, summary["utility"], self.utility)

    def finish(self, summary: dict[str, Any], ended: Any, uniform_noise: Any) -> tuple[Any, dict[str, Any]]:
        """The rewards ``(N,)`` (the preference bits on ``ended``, 0 elsewhere) and the summary with the comparison.

        Args:
            summary: the second responses' round summary (N rows, fill values off ``ended``).
            ended: ``(N,)`` bool, the rows whose round ended.
            uniform_noise: ``(N,)`` each row's ``eta ~ U[-1, 1]``.
        """
        outcome = preference_outcome(
            self.utility, summary["utility"], summary["optimal_utility"], uniform_noise, self.temperature
        )
        where = np.where if self.on_host else torch.where
        for key, value in outcome.items():
            mask = ended[:, None] if key == "utilities" else ended
            outcome[key] = where(mask, value, 0)
        rewards = outcome.pop("reward")
        summary.update(outcome)
        return rewards, summary

    def observation(self, observed: dict[str, Any]) -> dict[str, Any]:
        """``observed`` with ``first_response`` ``(N, L)`` and ``first_length`` ``(N,)`` (copies), in key order."""
        copy = np.copy if self.on_host else torch.clone
        return with_first_response(observed, copy(self.response), copy(self.length))


def with_first_response(observed: dict[str, Any], first_response: Any, first_length: Any) -> dict[str, Any]:
    """The observation ``observed`` with the pairwise entries, in the observation space's (sorted) key order."""
    entries = {**observed, "first_length": first_length, "first_response": first_response}
    return {key: entries[key] for key in sorted(entries)}
