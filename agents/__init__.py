"""Reference agents for tokenized bandits, one per file, named in a registry.

``agents.make(name, **kwargs)`` builds one; ``agents.list_agents()`` lists the names. Every
agent implements :class:`tokenized_bandit_gym.agent.Agent`.
"""

from typing import Any

from agents.registry import list_agents, make, register_agent

__all__ = ["Agent", "SB3Agent", "list_agents", "make", "register_agent"]


def __getattr__(name: str) -> Any:
    """Import ``Agent`` and ``SB3Agent`` on first use: ``import agents`` loads neither torch nor Stable-Baselines3."""
    if name == "Agent":
        from tokenized_bandit_gym.agent import Agent

        return Agent
    if name == "SB3Agent":
        from agents.sb3_agent import SB3Agent

        return SB3Agent
    raise AttributeError(f"module 'agents' has no attribute {name!r}")
