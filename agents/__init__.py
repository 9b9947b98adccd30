"""Reference agents for tokenized bandits, one per file, named in a registry.

``agents.make(name, **kwargs)`` builds one; ``agents.list_agents()`` lists the names. Every
agent implements :class:`tokenized_bandit_gym.agent.Agent`.
"""

from agents.registry import list_agents, make, register_agent
from tokenized_bandit_gym.agent import Agent

__all__ = ["Agent", "list_agents", "make", "register_agent"]
