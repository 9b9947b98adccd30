"""A PettingZoo ``ParallelEnv`` arena: named agents answer the same query with the same noise every round."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.core.validation import check_reset_seed
from tokenized_bandit_gym.envs.env_contract import (
    check_action,
    check_render_mode,
    observation_row,
    round_start_info,
    step_reward_and_info,
    summary_row,
)
from tokenized_bandit_gym.host_array import as_host_array

if TYPE_CHECKING:
    from tokenized_bandit_gym.envs.language_model_bandit_env import LanguageModelBanditEnv
    from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv

AgentObservation = dict[str, Any]


class TokenizedBanditArena(ParallelEnv[str, AgentObservation, int]):
    """Several named agents play the same tokenized bandit round side by side (common random numbers).

    ## Description

    Every registered id plays, the LLM-backed ones included. The M players are the M rows of one
    round batch of the env's instance (:meth:`round_batch` of the env's single-env shell: NumPy
    rows for a synthetic instance on the CPU, one batched LLM forward per step for the LLM ids),
    so the arena is a thin shell like the single and the vector env: it draws one round per
    reset from one query and noise stream, restarts every row on it, checks each action with
    the env contract and reports each row in the one-round form. Every round, every player
    answers the same query ``x_t`` and is paid ``u(x_t, y_t^agent) + eta_t`` with the *same*
    ``eta_t``.
    So a head-to-head comparison differs only by what the agents did: two agents that play the
    same tokens get identical rewards, and with ``reset(seed=s)`` each agent sees the queries,
    noise, observations and infos it would see alone in ``env.reset(seed=s)`` followed by
    unseeded resets (what ``run_online`` does): exactly on the synthetic ids, and to float
    rounding on the LLM ids (about 1e-6 in float32 on the CPU: the batched forward reduces over
    the other players' rows and masked columns, as in the LLM vector env).

    ## Spaces

    Per agent, the env's own: the flat ``Dict`` observation (``query``, ``query_length``,
    ``response``, ``length``, ``candidate_tokens``, ``candidate_embeddings`` where the family has
    features, ``candidate_logprobs`` in LLM envs, ``action_mask``) and ``Discrete(k)`` actions.

    ## Rewards and episode end

    An agent is terminated when its response is complete and leaves ``agents``; it gets its
    reward and the single env's round summary (``utility``, ``optimal_utility``, ``regret``,
    ``oracle_greedy_utility``, ``noise``, ``response`` padded to L, ``response_length``, ...) in
    that step's ``info`` (every step's info has the same keys, the env contract's schema). The
    episode ends when every agent is done. Agents finish at different steps. Truncation: never.
    At position L only EOS is allowed and any action there is the forced EOS
    (``info["forced_eos"]``) unless the env was made with ``strict_actions=True``.

    Args:
        env: a registered tokenized bandit env id, or an env made from one (its unwrapped env
            builds the round batch and lends its spaces; it is never stepped itself).
        agent_names: the names of the players (at least one, distinct).
        render_mode: None or ``"ansi"``.
        **env_kwargs: constructor keywords for ``gym.make(env, ...)`` when ``env`` is an id.

    Raises:
        ValueError: no or repeated agent names, keywords with an env object, an unknown render mode,
            an env with pairwise feedback (the arena's players each answer once a round).
        TypeError: ``env`` is not a tokenized bandit env (it has no ``round_batch``).

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
        check_render_mode(render_mode, self.metadata["render_modes"])
        names = list(agent_names)
        if not names or len(set(names)) != len(names) or not all(isinstance(name, str) for name in names):
            raise ValueError(f"agent_names must be one or more distinct strings, got {agent_names!r}")
        self._owns_env = isinstance(env, str)  # an env the arena made is closed with it
        if isinstance(env, str):
            env = gym.make(env, **env_kwargs)
        elif env_kwargs:
            raise ValueError(f"keywords {sorted(env_kwargs)} are only used with an env id, not an env object")
        unwrapped = env.unwrapped
        if not hasattr(unwrapped, "round_batch") or not hasattr(unwrapped, "problem"):
            raise TypeError(f"env must be a tokenized bandit env, got {type(unwrapped).__name__}")
        base = cast("TokenizedBanditEnv | LanguageModelBanditEnv", unwrapped)  # what the check above found
        if getattr(base, "feedback", "scalar") != "scalar":
            raise ValueError(f"the arena plays scalar feedback only, got an env with feedback={base.feedback!r}")
        self.env = env
        self.env_id = env.spec.id if env.spec is not None else None
        self.problem = base.problem
        self.render_mode = render_mode
        self.possible_agents = names
        self.agents: list[str] = []
        self.noise_model = base.noise_model
        self.strict_actions = base.strict_actions
        self.rounds = base.round_batch(len(names), host=True)  # row i is player i
        self._rows = {name: row for row, name in enumerate(names)}
        # each player's own spaces (seeding or sampling one moves no other's random state)
        self.observation_spaces = {name: copy.deepcopy(base.observation_space) for name in names}
        self.action_spaces = {name: copy.deepcopy(base.action_space) for name in names}
        self._streams: RoundStreams | None = None
        self._np_random = np.random.default_rng()
        # each player's allowed actions (k,) bool, response length and response so far, as last observed:
        # the arena's own copies, so nothing a caller does to an observation changes what is checked
        self._players: dict[str, tuple[np.ndarray, int, list[int]]] = {}
        self._query = 0
        self._noise = 0.0
        # the env's constant info entries (the LLM envs' benchmark_upper_bound), in every info as the env has them
        flag = getattr(base, "benchmark_upper_bound", None)
        self._constant_info: dict[str, Any] = {} if flag is None else {"benchmark_upper_bound": flag}

    @property
    def eos_token_id(self) -> int:
        """The EOS token id."""
        return self.problem.eos_token_id

    def observation_space(self, agent: str) -> spaces.Dict:
        """The observation space of ``agent`` (the same object on every call)."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        """The action space of ``agent`` (the same object on every call)."""
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, AgentObservation], dict[str, dict[str, Any]]]:
        """Start a round for every agent: one query and one noise draw, shared.

        ``seed`` reseeds the query and noise streams exactly as ``env.reset(seed=...)`` does
        (the first reset without one draws it), with the same check
        (:func:`~tokenized_bandit_gym.core.validation.check_reset_seed`).
        """
        seed = check_reset_seed(seed)
        if seed is None and self._streams is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        self._streams = RoundStreams.on_reset(self._streams, seed, self._np_random)
        self._query, self._noise = self._streams.draw(self.problem.num_queries, self.noise_model)
        self.agents = list(self.possible_agents)
        count = len(self.possible_agents)
        self.rounds.restart(
            self._as_rows(np.ones(count, dtype=bool)),
            self._as_rows(np.full(count, self._query, dtype=np.int64)),
            self._as_rows(np.full(count, self._noise, dtype=np.float64)),
        )
        observations = self._observe(self.agents)
        return observations, {
            name: {**round_start_info(self._query, self.rounds.info_schema), **self._constant_info}
            for name in self.agents
        }

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, AgentObservation],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Append each live agent's token to its response: one step of the round batch for everyone.

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
        count = len(self.possible_agents)
        chosen = np.zeros(count, dtype=np.int64)  # (M,) the players that are done take a throwaway 0
        stepping = np.zeros(count, dtype=bool)  # (M,)
        forced: dict[str, bool] = {}
        for name in self.agents:
            mask, length, _ = self._players[name]
            try:
                index, forced[name] = check_action(
                    actions[name], mask, length, self.problem.max_length, self.strict_actions
                )
            except (TypeError, ValueError) as error:
                raise type(error)(f"agent {name!r}: {error}") from error
            row = self._rows[name]
            chosen[row] = index  # the action to apply (the forced EOS's own index where it was forced)
            stepping[row] = True
        rounds = self.rounds
        rounds.advance(self._as_rows(chosen), self._as_rows(stepping))
        ended = stepping & as_host_array(rounds.finished)  # (M,)
        summary = rounds.round_summary(self._as_rows(ended)) if ended.any() else {}
        acting = list(self.agents)
        observations = self._observe(acting)
        rewards, terminations, infos = {}, {}, {}
        for name in acting:
            row = self._rows[name]
            terminations[name] = bool(ended[row])
            row_summary = summary_row(summary, row) if terminations[name] else None
            rewards[name], infos[name] = step_reward_and_info(
                self._query, forced[name], row_summary, self._noise, rounds.info_schema
            )
            infos[name].update(self._constant_info)
        self.agents = [name for name in acting if not terminations[name]]
        return observations, rewards, terminations, dict.fromkeys(acting, False), infos

    def action_masks(self, agent: str) -> np.ndarray:
        """Allowed actions of ``agent`` now, ``(k,)`` bool (a new array)."""
        return self._players[agent][0].copy()

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the query and every agent's response so far."""
        if self.render_mode != "ansi" or not self._players:
            return None
        query_length = int(self.problem.query_lengths[self._query])
        lines = [f"query {self.problem.query_tokens[self._query, :query_length].tolist()}"]
        for name, (_, _, tokens) in self._players.items():
            lines.append(f"{name}: [{' '.join('EOS' if t == self.eos_token_id else str(t) for t in tokens)}]")
        return "\n".join(lines)

    def close(self) -> None:
        """Close the env the arena made from an id (an env passed in stays the caller's to close)."""
        if self._owns_env:
            self.env.close()

    def _observe(self, names: list[str]) -> dict[str, AgentObservation]:
        """The observation of each of ``names``, a row of the batch's (and the arena's own copy of what it checks)."""
        observed = self.rounds.observe()
        observations = {}
        for name in names:
            row = observation_row(observed, self._rows[name])
            length = int(row["length"])
            self._players[name] = (row["action_mask"].astype(bool), length, row["response"][:length].tolist())
            observations[name] = row
        return observations

    def _as_rows(self, values: np.ndarray) -> Any:
        """``values`` ``(M,)`` as the round batch's rows (a NumPy array, or a tensor on the instance's device)."""
        return values if self.rounds.on_host else torch.from_numpy(values).to(self.problem.device)
