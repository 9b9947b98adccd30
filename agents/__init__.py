"""Reference agents for tokenized bandits, one per file; this folder is imported as ``tokenized_bandit_gym.agents``.

The project's layout keeps the agents in the repository's top-level ``agents/`` folder, and
``pyproject.toml`` maps it into the package (``[tool.setuptools.package-dir]``:
``"tokenized_bandit_gym.agents" = "agents"``), because a top-level ``agents`` package would collide
with other distributions' (e.g. openai-agents). So ``import agents`` does not work; import
``tokenized_bandit_gym.agents.eoful`` (and so on), also inside this folder.

``make(name, **kwargs)`` builds a registered agent and ``list_agents()`` lists the names; the
registry itself lives in :mod:`tokenized_bandit_gym.registration`. Every agent implements
:class:`tokenized_bandit_gym.agent.Agent`; ``tokenized_bandit_gym.testing.check_agent`` checks one.
"""

from typing import Any

from tokenized_bandit_gym.registration import AGENT_ENTRY_POINTS, list_agents, register_agent
from tokenized_bandit_gym.registration import make_agent as make

__all__ = ["AGENT_ENTRY_POINTS", "Agent", "SB3Agent", "list_agents", "make", "register_agent"]


def __getattr__(name: str) -> Any:
    """Import ``Agent`` and ``SB3Agent`` on first use: importing the agents loads neither torch nor SB3."""
    if name == "Agent":
        from tokenized_bandit_gym.agent import Agent

        return Agent
    if name == "SB3Agent":
        from tokenized_bandit_gym.agents.sb3_agent import SB3Agent

        return SB3Agent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
