"""Registered environment ids and agent names. Entry points are strings, so registering imports nothing heavy.

A change to rewards, noise or dynamics bumps the ``-vN`` suffix and adds a Version History line
to the env's docstring, so leaderboard numbers stay comparable.

Agents are registered like envs (Gymnasium's ``register``/``make``): a name maps to a
``"module:Class"`` string, imported only by :func:`make_agent`. So the env and evaluation layers
name agents without importing any agent module, and the implementations (the repository's
top-level ``agents/`` folder, installed as :mod:`tokenized_bandit_gym.agents`) depend on the
public API only.

A user's own agent goes everywhere a built-in one goes, in three ways: by its ``"package.module:Class"``
reference in place of a name, registered under a name with :func:`register_agent` (``tbg run --import
module`` imports a module that does so), or listed by an installed distribution in the entry-point group
:data:`AGENT_ENTRY_POINT_GROUP`. Worker processes repeat the registrations
(:func:`agent_registrations`, :func:`restore_agent_registrations`).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gymnasium.envs.registration import register, registry

from tokenized_bandit_gym.suggestions import did_you_mean

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

ALIGNMENT_V1_READING: dict[str, object] = {
    "value_map": "scaled_logprob",
    "pooling": "response",
    "theta_scale": "literal",
    "score_forced_eos": False,
}
"""The reading of ``TokenizedAlignment-v1`` (issue 48): ``v = log p / L`` without a forced EOS's term, ``e`` pooled
over the response, the paper's literal ``theta = 0.5 * 1``. Measured with ``tbg regime`` (docs/ALIGNMENT_REGIME.md)."""

# LLM-backed ids (transformers is imported only when one is made); default model: shipped stories260K.
LLM_ENVS: dict[str, tuple[str, dict[str, object]]] = {
    "TokenizedAlignment-v0": (_ALIGNMENT, {}),
    "TokenizedAlignment-v1": (_ALIGNMENT, dict(ALIGNMENT_V1_READING)),
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
    "dueling_eoful": f"{_AGENTS}.dueling_eoful:DuelingEOFUL",
    "tpop": f"{_AGENTS}.tpop:TPOP",
}


AGENT_ENTRY_POINT_GROUP = "tokenized_bandit_gym.agents"
"""The entry-point group an installed distribution lists its agents in (``name = "module:Class"``)."""

_BUILT_IN_AGENTS = frozenset(AGENT_ENTRY_POINTS)
_imported_agent_modules: list[str] = []
_entry_point_problems: dict[str, str] = {}
_entry_points_loaded = False


class AgentLoadError(ValueError):
    """An agent's ``"module:Class"`` does not import, or what it names is not an agent; the message names it."""


def _split_entry_point(entry_point: str) -> tuple[str, str] | None:
    """``(module, Class)`` of a ``"module:Class"`` string, or None when it does not have that shape."""
    module_name, _, class_name = entry_point.partition(":")
    if not module_name.strip() or not class_name.strip() or ":" in class_name:
        return None
    return module_name.strip(), class_name.strip()


def _load_installed_entry_points() -> None:
    """Register, once, the agents installed distributions list in :data:`AGENT_ENTRY_POINT_GROUP`.

    Nothing is imported here: each entry point's ``"module:Class"`` value is registered as it is, and
    imported when the agent is made. A malformed or clashing entry point is skipped and recorded in
    :func:`entry_point_problems` under its name, so it does not hide the other agents.
    """
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for entry_point in entry_points(group=AGENT_ENTRY_POINT_GROUP):
        value = entry_point.value.split("[", 1)[0].strip()  # drop an "[extra]" marker
        where = f"entry point {entry_point.name!r} = {entry_point.value!r} of group {AGENT_ENTRY_POINT_GROUP!r}"
        if _split_entry_point(value) is None:
            _entry_point_problems[entry_point.name] = f"{where} is not 'module:Class'"
        elif AGENT_ENTRY_POINTS.get(entry_point.name, value) != value:
            _entry_point_problems[entry_point.name] = (
                f"{where} clashes with the agent already registered as {AGENT_ENTRY_POINTS[entry_point.name]!r}"
            )
        else:
            AGENT_ENTRY_POINTS[entry_point.name] = value


def entry_point_problems() -> dict[str, str]:
    """Installed entry points that could not be registered (name -> why), after loading them."""
    _load_installed_entry_points()
    return dict(_entry_point_problems)


def built_in_agent_names() -> frozenset[str]:
    """The names of the agents this package ships (not registered by a user or an entry point)."""
    return _BUILT_IN_AGENTS


def list_agents() -> list[str]:
    """Names of every registered agent (built in, registered, or installed as an entry point), sorted."""
    _load_installed_entry_points()
    return sorted(AGENT_ENTRY_POINTS)


def is_agent_reference(name: str) -> bool:
    """Whether ``name`` is a registered agent name or a ``"package.module:Class"`` reference."""
    _load_installed_entry_points()
    return name in AGENT_ENTRY_POINTS or (":" in name and _split_entry_point(name) is not None)


def register_agent(name: str, entry_point: str) -> None:
    """Register ``entry_point`` (``"module:Class"``, imported only when the agent is made) under ``name``.

    Registering the same name with the same entry point again does nothing (so a module that registers
    its agents can be imported again, e.g. by each worker process).

    Raises:
        TypeError: ``name`` or ``entry_point`` is not a string.
        ValueError: ``name`` is taken by another entry point, or ``entry_point`` is not ``"module:Class"``.
    """
    if not isinstance(name, str) or not isinstance(entry_point, str):
        raise TypeError(f"name and entry_point must be strings, got {name!r} and {entry_point!r}")
    if _split_entry_point(entry_point) is None:
        raise ValueError(f"entry_point must look like 'module:Class', got {entry_point!r}")
    _load_installed_entry_points()
    if AGENT_ENTRY_POINTS.get(name, entry_point) != entry_point:
        raise ValueError(f"agent name {name!r} is already registered (as {AGENT_ENTRY_POINTS[name]!r})")
    AGENT_ENTRY_POINTS[name] = entry_point


def import_agent_modules(modules: list[str] | tuple[str, ...]) -> None:
    """Import modules that register agents (``tbg run --import``), and remember them for worker processes.

    Raises:
        AgentLoadError: a module does not import (the message names it and the error).
    """
    for module_name in modules:
        try:
            importlib.import_module(module_name)
        except Exception as error:  # noqa: BLE001  (any error in the user's module is reported by its name)
            raise AgentLoadError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from error
        if module_name not in _imported_agent_modules:
            _imported_agent_modules.append(module_name)


@dataclass(frozen=True)
class AgentRegistrations:
    """What a worker process needs to make the agents this process knows: modules to import, names to register.

    Entry points of installed distributions are not carried: a worker reads them from its own
    installation. ``"module:Class"`` names need nothing: the worker imports them when it makes the agent.
    """

    modules: tuple[str, ...] = ()
    entry_points: tuple[tuple[str, str], ...] = ()
    search_path: tuple[str, ...] = ()


def agent_registrations() -> AgentRegistrations:
    """This process's agent registrations beyond the built-in ones, for :func:`restore_agent_registrations`."""
    _load_installed_entry_points()
    added = tuple((name, entry) for name, entry in AGENT_ENTRY_POINTS.items() if name not in _BUILT_IN_AGENTS)
    return AgentRegistrations(tuple(_imported_agent_modules), added, tuple(sys.path))


def restore_agent_registrations(registrations: AgentRegistrations) -> None:
    """Repeat another process's registrations here (a worker): its import path, its modules, its names.

    Raises:
        AgentLoadError: a module does not import here.
    """
    sys.path.extend(entry for entry in registrations.search_path if entry not in sys.path)
    import_agent_modules(registrations.modules)
    for name, entry_point in registrations.entry_points:
        register_agent(name, entry_point)


def load_agent_class(name: str) -> type:
    """Import the class of the agent ``name``: a registered name or a ``"package.module:Class"`` reference.

    Raises:
        ValueError: unknown name (the message lists the known ones).
        AgentLoadError: its module does not import, lacks the class, or the class is not an agent
            (no ``reset`` with ``act``/``update`` or ``act_batch``/``update_batch``).
    """
    _load_installed_entry_points()
    entry_point = AGENT_ENTRY_POINTS.get(name, name)
    parts = _split_entry_point(entry_point)
    if parts is None:
        problem = _entry_point_problems.get(name)
        if problem is not None:
            raise AgentLoadError(f"agent {name!r} could not be registered: {problem}")
        raise ValueError(
            f"unknown agent {name!r}{did_you_mean(name, list_agents())}; registered agents: {list_agents()} "
            "(or give 'package.module:Class')"
        )
    module_name, class_name = parts
    source = repr(name) if entry_point == name else f"{name!r} ({entry_point!r})"
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001  (any import error is reported with the agent's name)
        raise AgentLoadError(
            f"agent {source}: cannot import module {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    agent_class = getattr(module, class_name, None)
    if agent_class is None:
        raise AgentLoadError(f"agent {source}: module {module_name!r} has no attribute {class_name!r}")
    plays_rounds = all(callable(getattr(agent_class, method, None)) for method in ("reset", "act", "update"))
    plays_batches = all(
        callable(getattr(agent_class, method, None)) for method in ("reset", "act_batch", "update_batch")
    )
    if not isinstance(agent_class, type) or not (plays_rounds or plays_batches):
        raise AgentLoadError(
            f"agent {source}: {agent_class!r} is not an agent class (an agent has reset, act and update, "
            "or reset, act_batch and update_batch)"
        )
    return agent_class


def _class_docstring_in_source(module_name: str, class_name: str) -> str | None:
    """The docstring of ``class_name`` in the source of ``module_name``, read without running the module."""
    try:
        module_spec = importlib.util.find_spec(module_name)
        if module_spec is None or module_spec.origin is None or not module_spec.origin.endswith(".py"):
            return None
        with open(module_spec.origin, encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (ImportError, ValueError, OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return ast.get_docstring(node)
    return None


def _plain_text(text: str) -> str:
    """``text`` without reStructuredText markup: ``:class:`~a.B``` -> ``B``, ````x```` -> ``x``."""
    text = re.sub(r":\w+:`~[\w.]*?(\w+)`", r"\1", text)
    text = re.sub(r":\w+:`([^`]*)`", r"\1", text)
    return text.replace("``", "")


def agent_description(name: str) -> str:
    """The first line of the agent's class docstring, as plain text ("" when there is none to read).

    A module not imported yet is read, not imported (so ``tbg list`` imports no agent, hence no torch);
    a module already imported (``--import``) gives its class's ``__doc__``.
    """
    _load_installed_entry_points()
    parts = _split_entry_point(AGENT_ENTRY_POINTS.get(name, name))
    if parts is None:
        return ""
    module_name, class_name = parts
    module = sys.modules.get(module_name)
    if module is not None:
        docstring = getattr(getattr(module, class_name, None), "__doc__", None)
    else:
        docstring = _class_docstring_in_source(module_name, class_name)
    lines = (docstring or "").strip().splitlines()
    return _plain_text(lines[0].strip()) if lines else ""


def make_agent(name: str, **kwargs: Any) -> Agent:
    """Build the agent ``name`` (a registered name or ``"package.module:Class"``) with ``kwargs``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
        AgentLoadError: the agent's class cannot be imported or is not an agent.
    """
    return load_agent_class(name)(**kwargs)
