"""Which kinds of task an agent plays (``tbg list``): linear (TLB), TMAB and LLM, and why not.

An agent is asked by :func:`agent_support`: built with its default arguments, it is reset on the task of
one representative id of each kind (a BatchedAgent with one sub-env), and what its ``reset`` raises is the
reason it does not play that kind (e.g. EOFUL needs candidate embeddings, which a TMAB has none of). An
agent that accepts a task may still fail later in a run; a run's failure is reported by the run.

Asking builds envs and agents (torch, the shipped LLM), so ``tbg list`` reads the built-in agents' answers
from :data:`BUILT_IN_UNSUPPORTED` instead, and asks only the user's agents (``tbg list --probe`` asks
every agent); a test checks that the table says what the agents answer.
"""

from __future__ import annotations

import functools
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

_NO_EMBEDDINGS = "needs candidate embeddings (embedding_dim), which a TMAB has none of"
_STOPPED_SEQUENCES = (
    "explores stopped sequences y:t:EOS, and the LLM envs default to fixed_length=True (EOS only at position L): "
    "pass fixed_length=False (or completion_token=c to the ETC agents)"
)
_PAIRWISE_ONLY = (
    "learns from pairwise comparisons: make the env with feedback='pairwise' (TLB ids and the alignment env)"
)
BUILT_IN_UNSUPPORTED: dict[str, dict[str, str]] = {
    "dueling_eoful": {"linear": _PAIRWISE_ONLY, "TMAB": _PAIRWISE_ONLY, "LLM": _PAIRWISE_ONLY},
    "tpop": {"linear": _PAIRWISE_ONLY, "TMAB": _PAIRWISE_ONLY, "LLM": _PAIRWISE_ONLY},
    "eoful": {"TMAB": _NO_EMBEDDINGS},
    "batched_eoful": {"TMAB": _NO_EMBEDDINGS},
    "tokenized_lin_ts": {"TMAB": _NO_EMBEDDINGS},
    "fixed_theta_greedy": {"TMAB": _NO_EMBEDDINGS},
    "lookahead_eoful": {
        "TMAB": "needs a TLB problem with an embedding oracle (a TMAB has no embeddings)",
        "LLM": "needs a TLB problem with an embedding oracle (its lookahead embeds prefixes the LLM has not run)",
    },
    "greedy_etc": {"LLM": _STOPPED_SEQUENCES},
    "batched_greedy_etc": {"LLM": _STOPPED_SEQUENCES},
    "lookahead_etc": {"LLM": _STOPPED_SEQUENCES},
    "greedy_ucb": {
        "LLM": "learns from stopped sequences y:t:EOS, and the LLM envs default to fixed_length=True: use uct"
    },
    "misaligned_greedy": {
        "linear": "needs observation['candidate_logprobs'], which only the LLM envs observe",
        "TMAB": "needs observation['candidate_logprobs'], which only the LLM envs observe",
    },
}
"""The kinds each built-in agent does not play, with why (a built-in agent not listed plays all three)."""


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


def one_line(error: BaseException) -> str:
    """``"TypeName: first line of the message"`` of ``error``."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


@functools.cache
def representative_tasks(horizon: int = 10) -> dict[str, Any]:
    """The :class:`~tokenized_bandit_gym.task.Task` of each kind's id (the LLM one loads the shipped model).

    Built once per process (agents only read a task).
    """
    import gymnasium as gym

    import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
    from tokenized_bandit_gym.task import Task

    tasks = {}
    for kind, env_id in TASK_KINDS.items():
        env = gym.make(env_id)
        tasks[kind] = Task.from_env(env, horizon)
        env.close()
    return tasks


def agent_support(name: str) -> AgentSupport:
    """Ask the agent ``name`` (default arguments) to reset on each kind's task (:func:`representative_tasks`).

    Never raises for a broken agent: a class that does not load (e.g. a failing entry point) or an
    agent that needs arguments is reported in :attr:`AgentSupport.problem`, so listing the others goes on.
    """
    try:
        agent = load_agent_class(name)()
    except AgentLoadError as error:
        return AgentSupport(name, {}, problem=str(error))
    except Exception as error:  # noqa: BLE001  (a user's agent may raise anything when built)
        return AgentSupport(name, {}, problem=f"cannot be built without arguments ({one_line(error)})")
    reasons: dict[str, str | None] = {}
    for kind, task in representative_tasks().items():
        try:
            reset_as_a_run_does(agent, task, 0)
            reasons[kind] = None
        except Exception as error:  # noqa: BLE001  (whatever the agent raises on this kind is the reason)
            reasons[kind] = one_line(error)
    return AgentSupport(name, reasons)


def reset_as_a_run_does(agent: Any, task: Any, seed: int | None) -> None:
    """Start ``agent`` on ``task`` as a run does, then close it if it can be closed.

    The run loops check the agent's feedback channel against the task's, then reset it: an Agent with
    ``(task, seed)``, a BatchedAgent with its ``batch_size`` sub-envs (the vector env a run gives it).

    Raises:
        Exception: whatever the agent's check or ``reset`` raises: the reason it does not play ``task``.
    """
    from tokenized_bandit_gym.agent import check_feedback

    check_feedback(agent, task)
    try:
        if callable(getattr(agent, "act_batch", None)):
            agent.reset(task, getattr(agent, "batch_size", 1), seed)
        else:
            agent.reset(task, seed)
    finally:
        close = getattr(agent, "close", None)
        if callable(close):
            close()


def declared_support(name: str) -> AgentSupport | None:
    """A built-in agent's support from :data:`BUILT_IN_UNSUPPORTED` (None for any other agent)."""
    from tokenized_bandit_gym.registration import built_in_agent_names

    if name not in built_in_agent_names():
        return None
    unsupported = BUILT_IN_UNSUPPORTED.get(name, {})
    return AgentSupport(name, {kind: unsupported.get(kind) for kind in TASK_KINDS})


def agent_support_table(names: Sequence[str], probe: bool = False) -> list[AgentSupport]:
    """The support of each agent: declared for built-in ones (unless ``probe``), else asked."""
    return [(None if probe else declared_support(name)) or agent_support(name) for name in names]
