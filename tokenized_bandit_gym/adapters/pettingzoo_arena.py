"""A PettingZoo ``ParallelEnv`` arena: named agents answer the same query with the same noise every round."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from tokenized_bandit_gym.envs.env_contract import check_action

AgentObservation = dict[str, Any]


class TokenizedBanditArena(ParallelEnv[str, AgentObservation, int]):
    """Several named agents play the same tokenized bandit round side by side (common random numbers).

    ## Description

    Every registered id plays, the LLM-backed ones included. Each of the M players answers in its
    own copy of the env's single-env shell: the copies share the problem instance (one model, one
    theta, one query pool) and are reset with the same seed, so their query and noise streams are
    one stream: every round, every player answers the same query ``x_t`` and is paid
    ``u(x_t, y_t^agent) + eta_t`` with the *same* ``eta_t``. The observation, the action check
    with the forced EOS and the info entries are the single env's own (nothing is re-implemented
    here).
    So a head-to-head comparison differs only by what the agents did: two agents that play the
    same tokens get identical rewards, and with ``reset(seed=s)`` each agent sees exactly the
    queries, noise, observations and infos it would see alone in ``env.reset(seed=s)`` followed
    by unseeded resets (what ``run_online`` does).

    ## Spaces

    Per agent, the env's own: the flat ``Dict`` observation (``query``, ``query_length``,
    ``response``, ``length``, ``candidate_tokens``, ``candidate_embeddings`` where the family has
    features, ``candidate_logprobs`` in LLM envs, ``action_mask``) and ``Discrete(k)`` actions.

    ## Rewards and episode end

    An agent is terminated when its response is complete and leaves ``agents``; it gets its
    reward and the single env's round summary (``utility``, ``optimal_utility``, ``regret``,
    ``oracle_greedy_utility``, ``optimal_kind``, ``noise``, ``response`` padded to L,
    ``response_length``, ...) in that step's ``info``. The
    episode ends when every agent is done. Agents finish at different steps. Truncation: never.
    At position L only EOS is allowed and any action there is the forced EOS
    (``info["forced_eos"]``) unless the env was made with ``strict_actions=True``.

    Args:
        env: a registered tokenized bandit env id, or an env made from one (its unwrapped env is
            copied per player, sharing the problem instance; it is never stepped itself).
        agent_names: the names of the players (at least one, distinct).
        render_mode: None or ``"ansi"``.
        **env_kwargs: constructor keywords for ``gym.make(env, ...)`` when ``env`` is an id.

    Raises:
        ValueError: no or repeated agent names, keywords with an env object, an unknown render mode.
        TypeError: ``env`` is not a tokenized bandit env (it has no ``problem``).

    >>> from tokenized_bandit_gym.adapters.pettingzoo_arena import TokenizedBanditArena
    >>> arena = TokenizedBanditArena("TokenizedMultiArmedBandit-v0", ["a", "b"])
    >>> observations, infos = arena.reset(seed=0)
    >>> sorted(observations)
    ['a', 'b']
    """

    metadata: dict[str, Any] = {
        "name": "tokenized_bandit_arena_v0",
        "render_modes": ["ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        env: str | gym.Env[Any, Any] = "TokenizedLinearBandit-v0",
        agent_names: Sequence[str] = ("player_0", "player_1"),
        render_mode: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        names = list(agent_names)
        if not names or len(set(names)) != len(names) or not all(isinstance(name, str) for name in names):
            raise ValueError(f"agent_names must be one or more distinct strings, got {agent_names!r}")
        if isinstance(env, str):
            env = gym.make(env, **env_kwargs)
        elif env_kwargs:
            raise ValueError(f"keywords {sorted(env_kwargs)} are only used with an env id, not an env object")
        base = env.unwrapped
        if not hasattr(base, "problem") or not hasattr(base, "action_masks"):
            raise TypeError(f"env must be a tokenized bandit env, got {type(base).__name__}")
        self.env = env
        self.env_id = env.spec.id if env.spec is not None else None
        self.problem = base.problem
        self.render_mode = render_mode
        self.possible_agents = names
        self.agents: list[str] = []
        # one shell per player, all sharing the instance (deepcopy's memo maps the problem to itself)
        self._envs: dict[str, gym.Env[Any, Any]] = {
            name: copy.deepcopy(base, memo={id(base.problem): base.problem}) for name in names
        }
        self.observation_spaces = {name: player.observation_space for name, player in self._envs.items()}
        self.action_spaces: dict[str, spaces.Space[Any]] = {
            name: player.action_space for name, player in self._envs.items()
        }
        self._observations: dict[str, AgentObservation] = {}
        self._query = 0

    @property
    def eos_token_id(self) -> int:
        """The EOS token id."""
        return self.problem.eos_token_id

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The observation space of ``agent`` (the same object on every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """The action space of ``agent`` (the same object on every call)."""
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, AgentObservation], dict[str, dict[str, Any]]]:
        """Start a round for every agent: one query and one noise draw, shared.

        ``seed`` reseeds the query and noise streams exactly as ``env.reset(seed=...)`` does
        (every player's shell with the same seed; the first reset without one draws it).
        """
        if seed is None and not self._observations:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self.agents = list(self.possible_agents)
        observations, infos = {}, {}
        for name in self.agents:
            observations[name], infos[name] = self._envs[name].reset(seed=seed)
        self._query = int(infos[self.agents[0]]["query_index"])
        self._observations = dict(observations)
        return observations, infos

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, AgentObservation],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Append each live agent's token to its response.

        Every action is checked before any player steps, so an invalid one changes nothing.

        Raises:
            ValueError: before :meth:`reset`, after every agent is done, an action missing for a
                live agent or given for one that is not, or an invalid action (as the single env).
            TypeError: a non-integer action.
        """
        if not self.agents:
            raise ValueError("step() called with no live agents: call reset() to start a round")
        unknown = sorted(set(actions) - set(self.agents))
        missing = sorted(set(self.agents) - set(actions))
        if unknown or missing:
            raise ValueError(
                f"actions must name exactly the live agents {self.agents}: missing {missing}, extra {unknown}"
            )
        for name in self.agents:
            player = self._envs[name]
            length = int(self._observations[name]["length"])
            try:
                check_action(
                    actions[name], player.action_masks(), length, self.problem.max_length, player.strict_actions
                )
            except (TypeError, ValueError) as error:
                raise type(error)(f"agent {name!r}: {error}") from error
        acting = list(self.agents)
        observations, rewards, terminations, infos = {}, {}, {}, {}
        for name in acting:
            observations[name], rewards[name], terminations[name], _, infos[name] = self._envs[name].step(actions[name])
        self._observations.update(observations)
        self.agents = [name for name in acting if not terminations[name]]
        return observations, rewards, terminations, dict.fromkeys(acting, False), infos

    def action_masks(self, agent: str) -> np.ndarray:
        """Allowed actions of ``agent`` now, ``(k,)`` bool."""
        return self._envs[agent].action_masks()

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the query and every agent's response so far."""
        if self.render_mode != "ansi" or not self._observations:
            return None
        query_length = int(self.problem.query_lengths[self._query])
        lines = [f"query {self.problem.query_tokens[self._query, :query_length].tolist()}"]
        for name, observation in self._observations.items():
            tokens = observation["response"][: int(observation["length"])].tolist()
            lines.append(f"{name}: [{' '.join('EOS' if t == self.eos_token_id else str(t) for t in tokens)}]")
        return "\n".join(lines)

    def close(self) -> None:
        """Close every player's shell."""
        for player in self._envs.values():
            player.close()
