"""A PettingZoo ``ParallelEnv`` arena: named agents answer the same query with the same noise every round."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

from tokenized_bandit_gym.core.decoding_state import DecodingState
from tokenized_bandit_gym.core.linear_tokenized_problem import LinearTokenizedProblem
from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.envs.tokenized_bandit_env import TokenizedBanditEnv, validate_action

AgentObservation = dict[str, Any]


class TokenizedBanditArena(ParallelEnv[str, AgentObservation, int]):
    """Several named agents play the same tokenized bandit round side by side (common random numbers).

    ## Description

    One round (episode) draws one query ``x_t`` and one noise ``eta_t`` from the same
    :class:`~tokenized_bandit_gym.core.round_streams.RoundStreams` a single env uses; every agent
    answers that query, token by token, in its own row of one batched
    :class:`~tokenized_bandit_gym.core.decoding_state.DecodingState` (M rows for M agents) of the
    env's problem instance, and is paid ``u(x_t, y_t^agent) + eta_t`` with the *same* ``eta_t``.
    So a head-to-head comparison differs only by what the agents did: two agents that play the
    same tokens get identical rewards, and with ``reset(seed=s)`` each agent sees exactly the
    queries, noise, observations and infos it would see alone in ``env.reset(seed=s)`` followed
    by unseeded resets (what ``run_online`` does).

    ## Spaces

    Per agent, the env's own: the flat ``Dict`` observation (``query``, ``query_length``,
    ``response``, ``length``, ``candidate_tokens``, ``candidate_embeddings`` for TLB,
    ``action_mask``) and ``Discrete(k)`` actions.

    ## Rewards and episode end

    An agent is terminated when its response is complete and leaves ``agents``; it gets its
    reward and the round summary (``utility``, ``optimal_utility``, ``regret``,
    ``oracle_greedy_utility``, ``optimal_kind``, ``noise``, ``response``, ``optimal_response``,
    ``response_embedding`` for TLB) in that step's ``info``, exactly like the single env. The
    episode ends when every agent is done. Agents finish at different steps. Truncation: never.
    At position L only EOS is allowed and any action there is the forced EOS
    (``info["forced_eos"]``) unless the env was made with ``strict_actions=True``.

    Args:
        env: a registered tokenized bandit env id, or an env (its unwrapped problem, noise model
            and ``strict_actions`` are used; it is never stepped).
        agent_names: the names of the players (at least one, distinct).
        render_mode: None or ``"ansi"``.
        **env_kwargs: constructor keywords for ``gym.make(env, ...)`` when ``env`` is an id.

    Raises:
        ValueError: no or repeated agent names, keywords with an env object, an unknown render mode.
        TypeError: ``env`` is not a tokenized bandit env.

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
        if not isinstance(base, TokenizedBanditEnv):
            raise TypeError(f"env must be a tokenized bandit env, got {type(base).__name__}")
        self.env_id = env.spec.id if env.spec is not None else None
        self.problem = base.problem
        self.noise_model = base.noise_model
        self.strict_actions = base.strict_actions
        self.render_mode = render_mode
        self.possible_agents = names
        self.agents: list[str] = []
        self.observation_spaces = {name: copy.deepcopy(base.observation_space) for name in names}
        self.action_spaces: dict[str, spaces.Space[Any]] = {name: copy.deepcopy(base.action_space) for name in names}
        self._rows = {name: row for row, name in enumerate(names)}
        self._num_actions = int(base.action_space.n)
        self._candidate_tokens = np.arange(self.problem.vocab_size, dtype=np.int64)
        self._streams: RoundStreams | None = None
        self._state: DecodingState | None = None
        self._carries: torch.Tensor | None = None
        self._masks = np.zeros((len(names), self.problem.vocab_size), dtype=bool)
        self._query = 0
        self._noise = 0.0

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

        ``seed`` reseeds the query and noise streams exactly as ``env.reset(seed=...)`` does.
        """
        if seed is not None or self._streams is None:
            stream_seed = seed if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
            self._streams = RoundStreams.from_seed(stream_seed)
        self._query, self._noise = self._streams.draw(self.problem.num_queries, self.noise_model)
        queries = torch.full((len(self.possible_agents),), self._query, dtype=torch.int64, device=self.problem.device)
        self._state = self.problem.initial_state(queries)  # M rows, one per agent
        self.agents = list(self.possible_agents)
        observations = self._observe(self.agents)
        return observations, {name: {"query_index": self._query} for name in self.agents}

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

        Raises:
            ValueError: before :meth:`reset`, after every agent is done, an action missing for a
                live agent or given for one that is not, or an invalid action (as the single env).
            TypeError: a non-integer action.
        """
        if self._state is None or not self.agents:
            raise ValueError("step() called with no live agents: call reset() to start a round")
        unknown = sorted(set(actions) - set(self.agents))
        missing = sorted(set(self.agents) - set(actions))
        if unknown or missing:
            raise ValueError(
                f"actions must name exactly the live agents {self.agents}: missing {missing}, extra {unknown}"
            )
        state = self._state
        tokens = torch.full((len(self.possible_agents),), self.eos_token_id, dtype=torch.int64)  # (M,)
        active = torch.zeros(len(self.possible_agents), dtype=torch.bool)  # (M,)
        forced: dict[str, bool] = {}
        for name in self.agents:
            row = self._rows[name]
            token = validate_action(actions[name], self._num_actions)
            forced[name] = False
            if not self._masks[row, token]:
                at_last_position = int(state.lengths[row]) >= self.problem.max_length - 1
                if self.strict_actions or not at_last_position:
                    raise ValueError(
                        f"agent {name!r}: action {token} is masked at position {int(state.lengths[row]) + 1}: "
                        f"allowed actions are {np.flatnonzero(self._masks[row]).tolist()}"
                    )
                token, forced[name] = self.eos_token_id, True
            tokens[row] = token
            active[row] = True
        device = self.problem.device
        self._state = self.problem.advance(
            state, tokens.to(device), active=active.to(device), candidate_carries=self._carries
        )
        acting = list(self.agents)
        finished = self._state.finished.cpu().numpy()  # (M,)
        terminations = {name: bool(finished[self._rows[name]]) for name in acting}
        rewards = {name: 0.0 for name in acting}
        infos: dict[str, dict[str, Any]] = {
            name: {"query_index": self._query, "forced_eos": forced[name]} for name in acting
        }
        done = [name for name in acting if terminations[name]]
        if done:
            summaries = self._round_summaries(done)
            for name in done:
                infos[name].update(summaries[name])
                rewards[name] = summaries[name]["utility"] + self._noise
        observations = self._observe(acting)
        self.agents = [name for name in acting if not terminations[name]]
        return observations, rewards, terminations, dict.fromkeys(acting, False), infos

    def action_masks(self, agent: str) -> np.ndarray:
        """Allowed actions of ``agent`` now, ``(k,)`` bool."""
        return self._masks[self._rows[agent]].copy()

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the query and every agent's response so far."""
        if self.render_mode != "ansi" or self._state is None:
            return None
        query_length = int(self.problem.query_lengths[self._query])
        lines = [f"query {self.problem.query_tokens[self._query, :query_length].tolist()}"]
        for name, row in self._rows.items():
            length = int(self._state.lengths[row])
            tokens = self._state.tokens[row, :length].tolist()
            lines.append(f"{name}: [{' '.join('EOS' if t == self.eos_token_id else str(t) for t in tokens)}]")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release."""

    # ------------------------------------------------------------------ helpers
    def _observe(self, names: Sequence[str]) -> dict[str, AgentObservation]:
        """Observations of ``names`` (built like ``TokenizedBanditEnv._observe``, one row each)."""
        state = self._state
        if state is None:
            raise ValueError("the arena has no round yet: call reset() first")
        self._masks = self.problem.action_mask(state).cpu().numpy()  # (M, n)
        unfinished = bool((~state.finished).any())
        self._carries = self.problem.candidate_carries(state) if unfinished else None  # (M, n, *c)
        embeddings = None
        if isinstance(self.problem, LinearTokenizedProblem) and self._carries is not None:
            embeddings = self.problem.candidate_embeddings(state, self._carries).to(torch.float32).cpu().numpy()
        query_tokens = self.problem.query_tokens[self._query].cpu().numpy().astype(np.int64)
        query_length = np.int64(self.problem.query_lengths[self._query])
        tokens = state.tokens.cpu().numpy()  # (M, L)
        lengths = state.lengths.cpu().numpy()  # (M,)
        finished = state.finished.cpu().numpy()  # (M,)
        observations: dict[str, AgentObservation] = {}
        for name in names:
            row = self._rows[name]
            observation: AgentObservation = {
                "query": query_tokens.copy(),
                "query_length": query_length,
                "response": tokens[row].copy(),
                "length": np.int64(lengths[row]),
                "candidate_tokens": self._candidate_tokens.copy(),
                "action_mask": self._masks[row].astype(np.int8),
            }
            if isinstance(self.problem, LinearTokenizedProblem):
                space = self.observation_spaces[name]["candidate_embeddings"]  # type: ignore[index]
                if embeddings is None or finished[row]:
                    observation["candidate_embeddings"] = np.zeros(space.shape, dtype=np.float32)
                else:
                    observation["candidate_embeddings"] = embeddings[row].copy()
            observations[name] = observation
        return observations

    def _round_summaries(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The final-info entries (DESIGN.md section 2) of the agents ``names``, just finished."""
        state = self._state
        if state is None:
            raise ValueError("the arena has no round yet: call reset() first")
        # One row at a time: a batched (M, d) @ (d,) product may round differently in different
        # rows, and two agents with the same response must get bit-identical utilities (and the
        # same as the single env, which computes a batch of one).
        rows = [self._rows[name] for name in names]
        utilities = {
            row: float(self.problem.utility_of(state.select(torch.tensor([row], device=state.queries.device)))[0])
            for row in rows
        }
        optimum = self.problem.optimal(state.queries[:1])
        greedy = self.problem.oracle_greedy(state.queries[:1])
        optimal_utility = float(optimum.utility[0])
        embeddings = None
        if isinstance(self.problem, LinearTokenizedProblem):
            embeddings = self.problem.embedding_of(state).to(torch.float32).cpu().numpy()  # (M, d)
        summaries = {}
        for name in names:
            row = self._rows[name]
            length = int(state.lengths[row])
            summary: dict[str, Any] = {
                "utility": utilities[row],
                "optimal_utility": optimal_utility,
                "regret": optimal_utility - utilities[row],
                "oracle_greedy_utility": float(greedy.utility[0]),
                "optimal_kind": "exact",
                "noise": self._noise,
                "response": state.tokens[row, :length].cpu().numpy(),
                "optimal_response": optimum.responses[0].cpu().numpy(),
            }
            if embeddings is not None:
                summary["response_embedding"] = embeddings[row].copy()
            summaries[name] = summary
        return summaries
