"""Registered environment ids and agent names. Entry points are strings, so registering imports nothing heavy.

A change to rewards, noise or dynamics bumps the ``-vN`` suffix and adds a Version History line
to the env's docstring, so leaderboard numbers stay comparable.

Agents are registered like envs (Gymnasium's ``register``/``make``): a name maps to a
``"module:Class"`` string, imported only by :func:`make_agent`. So the env and evaluation layers
name agents without importing any agent module, and the implementations (the repository's
top-level ``agents/`` folder, installed as :mod:`tokenized_bandit_gym.agents`) depend on the
public API only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gymnasium.envs.registration import register, registry

if TYPE_CHECKING:
    from tokenized_bandit_gym.agent import Agent

_TLB = "tokenized_bandit_gym.envs.tokenized_linear_bandit_env:TokenizedLinearBanditEnv"
_TMAB = "tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_env:TokenizedMultiArmedBanditEnv"
_ALIGNMENT = "tokenized_bandit_gym.envs.tokenized_alignment_env:TokenizedAlignmentEnv"
_DECODING = "tokenized_bandit_gym.envs.tokenized_decoding_env:TokenizedDecodingEnv"

# single-env entry point -> its native vector env (``gym.make_vec`` uses it by default)
VECTOR_ENTRY_POINTS: dict[str, str] = {
    _TLB: "tokenized_bandit_gym.envs.tokenized_linear_bandit_vector_env:TokenizedLinearBanditVectorEnv",
    _TMAB: "tokenized_bandit_gym.envs.tokenized_multi_armed_bandit_vector_env:TokenizedMultiArmedBanditVectorEnv",
    _ALIGNMENT: "tokenized_bandit_gym.envs.tokenized_alignment_vector_env:TokenizedAlignmentVectorEnv",
    _DECODING: "tokenized_bandit_gym.envs.tokenized_decoding_vector_env:TokenizedDecodingVectorEnv",
}

# id -> (entry point, default kwargs)
SYNTHETIC_ENVS: dict[str, tuple[str, dict[str, object]]] = {
    "TokenizedLinearBandit-v0": (_TLB, {}),
    "TokenizedLinearBanditMeanPool-v0": (_TLB, {"family": "meanpool"}),
    "TokenizedLinearBanditMarkov-v0": (_TLB, {"family": "markov", "ddmc_violation": 1.0}),
    "TokenizedLinearBanditNeedle-v0": (
        _TLB,
        {"family": "needle", "vocab_size": 3, "max_length": 6, "embedding_dim": 2},
    ),
    "TokenizedMultiArmedBandit-v0": (_TMAB, {}),
    "TokenizedMultiArmedBanditRandomTable-v0": (
        _TMAB,
        {"family": "random_table", "vocab_size": 4, "max_length": 5},
    ),
}

# LLM-backed ids (transformers is imported only when one is made); default model: shipped stories260K.
LLM_ENVS: dict[str, tuple[str, dict[str, object]]] = {
    "TokenizedAlignment-v0": (_ALIGNMENT, {}),
    "TokenizedDecoding-v0": (_DECODING, {}),
}


def register_envs() -> None:
    """Register every id once (safe to call again)."""
    for env_id, (entry_point, kwargs) in {**SYNTHETIC_ENVS, **LLM_ENVS}.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point=entry_point,
                vector_entry_point=VECTOR_ENTRY_POINTS.get(entry_point),
                kwargs=dict(kwargs),
            )


def registered_ids() -> list[str]:
    """Every id this package registers."""
    return [env_id for env_id in registry if env_id in SYNTHETIC_ENVS or env_id in LLM_ENVS]


_AGENTS = "tokenized_bandit_gym.agents"

# agent name -> "module:Class"; adding an agent adds its own file under agents/ and one line here.
AGENT_ENTRY_POINTS: dict[str, str] = {
    "random": f"{_AGENTS}.random_agent:RandomAgent",
    "oracle_greedy": f"{_AGENTS}.oracle_greedy:OracleGreedy",
    "eoful": f"{_AGENTS}.eoful:EOFUL",
    "lookahead_eoful": f"{_AGENTS}.lookahead_eoful:LookaheadEOFUL",
    "tokenized_lin_ts": f"{_AGENTS}.tokenized_lin_ts:TokenizedLinTS",
    "fixed_theta_greedy": f"{_AGENTS}.fixed_theta_greedy:FixedThetaGreedy",
    "oracle_optimal": f"{_AGENTS}.oracle_optimal:OracleOptimal",
    "sb3": f"{_AGENTS}.sb3_agent:SB3Agent",
    "ppo": f"{_AGENTS}.sb3_agent:PPOAgent",
    "a2c": f"{_AGENTS}.sb3_agent:A2CAgent",
    "dqn": f"{_AGENTS}.sb3_agent:DQNAgent",
    "maskable_ppo": f"{_AGENTS}.sb3_agent:MaskablePPOAgent",
    "recurrent_ppo": f"{_AGENTS}.sb3_agent:RecurrentPPOAgent",
    "greedy_etc": f"{_AGENTS}.greedy_etc:GreedyETC",
    "batched_greedy_etc": f"{_AGENTS}.batched_greedy_etc:BatchedGreedyETC",
    "batched_eoful": f"{_AGENTS}.batched_eoful:BatchedEOFUL",
    "lookahead_etc": f"{_AGENTS}.lookahead_etc:LookaheadETC",
    "greedy_ucb": f"{_AGENTS}.greedy_ucb:GreedyUCB",
    "uct": f"{_AGENTS}.uct:UCT",
    "misaligned_greedy": f"{_AGENTS}.misaligned_greedy:MisalignedGreedy",
}


def list_agents() -> list[str]:
    """Names of every registered agent, sorted."""
    return sorted(AGENT_ENTRY_POINTS)


def register_agent(name: str, entry_point: str) -> None:
    """Register ``entry_point`` (``"module:Class"``, imported only when the agent is made) under ``name``.

    Raises:
        TypeError: ``name`` or ``entry_point`` is not a string.
        ValueError: ``name`` is taken or ``entry_point`` is not ``"module:Class"``.
    """
    if not isinstance(name, str) or not isinstance(entry_point, str):
        raise TypeError(f"name and entry_point must be strings, got {name!r} and {entry_point!r}")
    if name in AGENT_ENTRY_POINTS:
        raise ValueError(f"agent name {name!r} is already registered")
    module_name, _, class_name = entry_point.partition(":")
    if not module_name or not class_name or ":" in class_name:
        raise ValueError(f"entry_point must look like 'module:Class', got {entry_point!r}")
    AGENT_ENTRY_POINTS[name] = entry_point


def make_agent(name: str, **kwargs: Any) -> Agent:
    """Build the agent registered as ``name`` with ``kwargs`` (its module is imported now).

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name not in AGENT_ENTRY_POINTS:
        raise ValueError(f"unknown agent {name!r}; registered agents: {list_agents()}")
    module_name, class_name = AGENT_ENTRY_POINTS[name].split(":")
    agent_class = getattr(importlib.import_module(module_name), class_name)
    return agent_class(**kwargs)
