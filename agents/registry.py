"""Name -> agent class, so specs and the CLI can name agents (``agents.make("eoful")``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenized_bandit_gym.agent import Agent

# name -> "module:Class"; adding an agent adds one line here and its own file.
AGENT_ENTRY_POINTS: dict[str, str] = {
    "random": "agents.random_agent:RandomAgent",
    "oracle_greedy": "agents.oracle_greedy:OracleGreedy",
    "eoful": "agents.eoful:EOFUL",
    "lookahead_eoful": "agents.lookahead_eoful:LookaheadEOFUL",
    "tokenized_lin_ts": "agents.tokenized_lin_ts:TokenizedLinTS",
    "fixed_theta_greedy": "agents.fixed_theta_greedy:FixedThetaGreedy",
    "oracle_optimal": "agents.oracle_optimal:OracleOptimal",
    "sb3": "agents.sb3_agent:SB3Agent",
    "ppo": "agents.sb3_agent:PPOAgent",
    "a2c": "agents.sb3_agent:A2CAgent",
    "dqn": "agents.sb3_agent:DQNAgent",
    "maskable_ppo": "agents.sb3_agent:MaskablePPOAgent",
    "recurrent_ppo": "agents.sb3_agent:RecurrentPPOAgent",
    "greedy_etc": "agents.greedy_etc:GreedyETC",
    "batched_greedy_etc": "agents.batched_greedy_etc:BatchedGreedyETC",
    "batched_eoful": "agents.batched_eoful:BatchedEOFUL",
    "lookahead_etc": "agents.lookahead_etc:LookaheadETC",
    "greedy_ucb": "agents.greedy_ucb:GreedyUCB",
    "uct": "agents.uct:UCT",
    "misaligned_greedy": "agents.misaligned_greedy:MisalignedGreedy",
}


def list_agents() -> list[str]:
    """Names of every registered agent, sorted."""
    return sorted(AGENT_ENTRY_POINTS)


def register_agent(name: str, entry_point: str) -> None:
    """Register ``entry_point`` (``"module:Class"``) under ``name``.

    Raises:
        ValueError: ``name`` is taken or ``entry_point`` is not ``"module:Class"``.
    """
    if name in AGENT_ENTRY_POINTS:
        raise ValueError(f"agent name {name!r} is already registered")
    if entry_point.count(":") != 1:
        raise ValueError(f"entry_point must look like 'module:Class', got {entry_point!r}")
    AGENT_ENTRY_POINTS[name] = entry_point


def make(name: str, **kwargs: Any) -> Agent:
    """Build the agent registered as ``name`` with ``kwargs``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name not in AGENT_ENTRY_POINTS:
        raise ValueError(f"unknown agent {name!r}; registered agents: {list_agents()}")
    module_name, class_name = AGENT_ENTRY_POINTS[name].split(":")
    agent_class = getattr(importlib.import_module(module_name), class_name)
    return agent_class(**kwargs)
