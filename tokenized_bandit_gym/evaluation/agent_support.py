"""Which kinds of task an agent plays (``tbg list``): linear (TLB), TMAB and LLM, and why not.

Support is asked of the agent itself, not declared beside it: built with its default arguments, the agent
is reset on the task of one representative id of each kind (a BatchedAgent with one sub-env), and what
its ``reset`` raises is the reason it does not play that kind (e.g. EOFUL needs candidate embeddings,
which a TMAB has none of). An agent that accepts a task may still fail later in a run; a run's failure is
reported by the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenized_bandit_gym.registration import AgentLoadError, load_agent_class

TASK_KINDS: dict[str, str] = {
    "linear": "TokenizedLinearBandit-v0",
    "TMAB": "TokenizedMultiArmedBandit-v0",
    "LLM": "TokenizedAlignment-v0",
}
"""Each kind of task and the id that stands for it."""


@dataclass(frozen=True)
class AgentSupport:
    """What :func:`agent_support` found about one agent.

    Attributes:
        name: the agent's registered name or ``"package.module:Class"``.
        reasons: for each kind of :data:`TASK_KINDS`, None when the agent accepts its task, else why not.
        problem: why the agent could not be asked at all (its class does not load, or it needs
            arguments), or None.
    """

    name: str
    reasons: dict[str, str | None]
    problem: str | None = None

    @property
    def supported(self) -> list[str]:
        """The kinds the agent plays, in the order of :data:`TASK_KINDS`."""
        return [kind for kind, reason in self.reasons.items() if reason is None]


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def representative_tasks(horizon: int = 10) -> dict[str, Any]:
    """The :class:`~tokenized_bandit_gym.task.Task` of each kind's id (the LLM one loads the shipped model)."""
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.task import Task

    tasks = {}
    for kind, env_id in TASK_KINDS.items():
        env = gym.make(env_id)
        tasks[kind] = Task.from_env(env, horizon)
        env.close()
    return tasks


def agent_support(name: str, tasks: dict[str, Any] | None = None) -> AgentSupport:
    """Ask the agent ``name`` (default arguments) to reset on each kind's task.

    Never raises for a broken agent: a class that does not load (e.g. a failing entry point) or an
    agent that needs arguments is reported in :attr:`AgentSupport.problem`, so listing the others goes on.

    Args:
        name: a registered agent name or ``"package.module:Class"``.
        tasks: :func:`representative_tasks` (built here if None; pass them to ask several agents).
    """
    tasks = representative_tasks() if tasks is None else tasks
    try:
        agent = load_agent_class(name)()
    except AgentLoadError as error:
        return AgentSupport(name, {}, problem=str(error))
    except Exception as error:  # noqa: BLE001  (a user's agent may raise anything when built)
        return AgentSupport(name, {}, problem=f"cannot be built without arguments ({_one_line(error)})")
    reasons: dict[str, str | None] = {}
    for kind, task in tasks.items():
        try:
            if callable(getattr(agent, "act_batch", None)):
                agent.reset(task, 1, 0)
            else:
                agent.reset(task, 0)
            reasons[kind] = None
        except Exception as error:  # noqa: BLE001  (whatever the agent raises on this kind is the reason)
            reasons[kind] = _one_line(error)
    return AgentSupport(name, reasons)


def agent_support_table(names: Sequence[str]) -> list[AgentSupport]:
    """:func:`agent_support` of each name, the representative tasks built once."""
    tasks = representative_tasks()
    return [agent_support(name, tasks) for name in names]
