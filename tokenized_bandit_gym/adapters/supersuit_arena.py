"""The PettingZoo arena as SuperSuit's wrappers and vector constructors take it: flat Box observations."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.wrappers import BaseParallelWrapper

from tokenized_bandit_gym.adapters.pettingzoo_arena import AgentObservation, TokenizedBanditArena


class SuperSuitArena(BaseParallelWrapper[str, np.ndarray, int]):
    """A :class:`TokenizedBanditArena` with each player's ``Dict`` observation flattened into one ``Box``.

    ## Description

    SuperSuit's ``black_death_v3`` (players finish their responses at different steps, and
    ``pettingzoo_env_to_vec_env_v1`` needs every player present at every step) takes only ``Box``
    observations. This wrapper flattens each observation with Gymnasium's
    :func:`~gymnasium.spaces.flatten` (as ``gymnasium.wrappers.FlattenObservation`` does for a
    single env: a ``MultiDiscrete`` entry one-hot per position, a ``Box`` entry as its values),
    so the documented pipeline runs on every registered id::

        import supersuit as ss
        from tokenized_bandit_gym.adapters.supersuit_arena import SuperSuitArena

        arena = SuperSuitArena(TokenizedBanditArena("TokenizedLinearBandit-v0", ["a", "b"]))
        envs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(ss.black_death_v3(arena)), 4)

    ``concat_vec_envs_v1`` copies the whole chain with cloudpickle (every env pickles; an LLM env
    as its model's name and its settings, not its weights) and steps ``4 * M`` players as one
    Gymnasium vector env. :meth:`action_masks_of` reads the allowed actions of a batch of flat
    rows (all False in black death's zero rows of finished players), and
    :meth:`unflatten_observation` gives a live player's row back as its ``Dict`` observation.

    ## Episode end

    As the arena: a player that completes its response is terminated and leaves ``agents``
    (PettingZoo's convention for agents that finish early), and the episode ends when every
    player is done. At the step that ends the round for the last players, their
    ``truncations`` are True beside their ``terminations``: SuperSuit 3.11's ``black_death_v3``
    ends an episode only where every player of the step is both terminated and truncated (and
    otherwise steps an arena with no live players). Nothing else is truncated, and the rewards,
    infos and termination flags are the arena's own.

    Args:
        arena: the arena to wrap.

    Raises:
        TypeError: ``arena`` is not a :class:`TokenizedBanditArena`.
    """

    def __init__(self, arena: TokenizedBanditArena) -> None:
        if not isinstance(arena, TokenizedBanditArena):
            raise TypeError(f"arena must be a TokenizedBanditArena, got {type(arena).__name__}")
        super().__init__(arena)
        self.metadata = arena.metadata
        self.dict_observation_spaces = {name: arena.observation_space(name) for name in arena.possible_agents}
        self.observation_spaces = {  # gymnasium's flatten_space of a Dict space is a Box
            name: cast(spaces.Box, spaces.flatten_space(space)) for name, space in self.dict_observation_spaces.items()
        }
        entries = arena.observation_space(arena.possible_agents[0]).spaces
        keys = list(entries)
        start = sum(spaces.flatdim(entries[key]) for key in keys[: keys.index("action_mask")])
        self._mask_columns = slice(start, start + spaces.flatdim(entries["action_mask"]))

    def observation_space(self, agent: str) -> spaces.Box:
        """The flat ``Box`` observation space of ``agent`` (the same object on every call)."""
        return self.observation_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """The arena's reset, each observation flattened to ``(D,)``."""
        observations, infos = self.env.reset(seed=seed, options=options)
        return self._flatten(observations), infos

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """The arena's step, each observation flattened; the round's last players are truncated too (see above)."""
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        if not self.env.agents:  # the round is over for everyone
            truncations = dict(terminations)
        return self._flatten(observations), rewards, terminations, truncations, infos

    def action_masks_of(self, rows: np.ndarray) -> np.ndarray:
        """The allowed actions in flat observation rows: ``(..., D)`` -> ``(..., k)`` bool (the rows' own columns)."""
        return np.asarray(rows)[..., self._mask_columns].astype(bool)

    def unflatten_observation(self, agent: str, observation: np.ndarray) -> AgentObservation:
        """The ``Dict`` observation of ``agent`` from its flat ``(D,)`` row (a live player's, not a zero row)."""
        return spaces.unflatten(self.dict_observation_spaces[agent], observation)

    def _flatten(self, observations: dict[str, AgentObservation]) -> dict[str, np.ndarray]:
        return {
            name: spaces.flatten(self.dict_observation_spaces[name], row)  # type: ignore[misc]  # a Dict's: an array
            for name, row in observations.items()
        }
