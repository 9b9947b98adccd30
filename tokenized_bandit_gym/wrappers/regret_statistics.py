"""Per-round utility, optimal utility and regret, with their running sums, in ``info``."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym


class RegretStatistics(gym.Wrapper[Any, Any, Any, Any]):
    """Record what every finished round (episode) scored, like Gymnasium's ``RecordEpisodeStatistics``.

    At the last step of each episode ``info["regret_statistics"]`` holds the round's ``utility``,
    ``optimal_utility`` and ``regret`` (docs/ENVIRONMENTS.md, "The info entries and regret") and the running sums
    ``cumulative_utility``, ``cumulative_optimal_utility``, ``cumulative_regret`` and ``rounds``
    since the wrapper was made (they survive ``reset``, since learning spans episodes). The
    same numbers are attributes of the wrapper, and ``regrets`` lists every round's regret.
    Every other step's info (reset included) holds the same entry, with the running sums so far
    and the round's entries as the env's info has them (its fill values), so the info keeps one
    schema over the episode.

    Args:
        env: a tokenized bandit env (its final ``info`` has ``utility``, ``optimal_utility``
            and ``regret``).
        info_key: the ``info`` key to write.

    Raises:
        ValueError: (at the end of an episode) the env's final ``info`` lacks those keys.
    """

    def __init__(self, env: gym.Env[Any, Any], info_key: str = "regret_statistics") -> None:
        super().__init__(env)
        if not isinstance(info_key, str) or not info_key:
            raise ValueError(f"info_key must be a non-empty string, got {info_key!r}")
        self.info_key = info_key
        self.rounds = 0
        self.cumulative_utility = 0.0
        self.cumulative_optimal_utility = 0.0
        self.cumulative_regret = 0.0
        self.regrets: list[float] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env; its info gets the running statistics."""
        observation, info = self.env.reset(seed=seed, options=options)
        return observation, self._with_statistics(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at the end of an episode add the round to the statistics; every info gets them."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            missing = [key for key in ("utility", "optimal_utility", "regret") if key not in info]
            if missing:
                raise ValueError(f"the episode ended without {missing} in info: is this a tokenized bandit env?")
            self.rounds += 1
            self.cumulative_utility += float(info["utility"])
            self.cumulative_optimal_utility += float(info["optimal_utility"])
            self.cumulative_regret += float(info["regret"])
            self.regrets.append(float(info["regret"]))
        return observation, reward, terminated, truncated, self._with_statistics(info)

    def _with_statistics(self, info: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``info`` with ``info[info_key]``: the round's entries (0.0 where absent) and the running sums."""
        info = dict(info)
        info[self.info_key] = {
            "utility": float(info.get("utility", 0.0)),
            "optimal_utility": float(info.get("optimal_utility", 0.0)),
            "regret": float(info.get("regret", 0.0)),
            "cumulative_utility": self.cumulative_utility,
            "cumulative_optimal_utility": self.cumulative_optimal_utility,
            "cumulative_regret": self.cumulative_regret,
            "rounds": self.rounds,
        }
        return info
