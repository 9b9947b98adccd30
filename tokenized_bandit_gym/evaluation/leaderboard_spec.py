"""Leaderboard specs: which agents play which tasks, for how many rounds and seeds (TOML).

A spec file looks like this (the default suite, ``tbg run leaderboard``, ships in the package as
``tokenized_bandit_gym/specs/leaderboard.toml``; :func:`load_spec` finds a shipped spec by its name)::

    title = "my leaderboard"        # optional
    rounds = 200                    # T for every task unless a task sets its own
    seeds = [0, 1, 2]               # or an integer N, meaning 0 .. N-1

    [[task]]
    id = "TokenizedLinearBandit-v0"  # a registered env id (``tbg list``)
    kwargs = { vocab_size = 8 }      # optional, passed to gym.make
    label = "TLB n=8"                # optional display name
    rounds = 300                     # optional override
    horizons = [100, 200]            # optional: also run every agent at these T < rounds, to fit R(T) ~ T^a
    caveat = "..."                   # optional: a note the report prints beside the task
    theorem_applies = true           # optional (default false): the caveat says the paper's bound holds here, so
                                     # the report shows theory's exponents and dashed curves on this task

    [[agent]]
    name = "eoful"                   # a registered agent name (``tbg list``) or "package.module:Class"
    kwargs = { beta = 0.1 }          # optional, passed to tokenized_bandit_gym.agents.make
    label = "EOFUL"                  # optional display name
    tasks = ["TLB n=8"]              # optional: only these task labels (default: every task)
    reference = false                # optional: a reference row, not ranked (default: oracles and random)
    theory_exponent = 0.5            # optional: theory's a in R(T) = O(T^a (log T)^(1-a)) (default by name)

Every task x agent x horizon x seed is one run. An agent with ``act_batch`` (a BatchedAgent such as
``batched_greedy_etc``) plays the env's native vector env with ``batch_size`` sub-envs.

Validation raises :class:`SpecError` naming the field (``task[1].kwargs``) and the bad value; env
kwargs are checked by making the env once, agent kwargs by building the agent once, and names against
the registries at validation time (so agents registered later are accepted once they exist). An agent's
``"package.module:Class"`` that does not import, or names something that is not an agent, is refused here,
before any run.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenized_bandit_gym.evaluation.run_record import ARRAY_NAMES
from tokenized_bandit_gym.evaluation.run_spec import RunSpec, canonical_json
from tokenized_bandit_gym.suggestions import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_TOP_KEYS = {"title", "rounds", "seeds", "task", "agent"}
# Lower bounds of the memory the sizes of a spec take, checked with core.validation.check_memory.
RUN_BYTES = 512  # one RunSpec of a sweep (a frozen dataclass, its kwargs and key) while the sweep is listed
ROUND_BYTES = 8 * len(ARRAY_NAMES)  # one round of one run: a float64 in each per-round array
SPEC_FILE_BYTES_PER_BYTE = 16  # the TOML text and the Python objects parsed from it, per byte of the file
SPEC_FILE_MAX_BYTES = 16 * 2**20  # a spec is a few kilobytes; nothing larger is read
_TASK_KEYS = {"id", "kwargs", "label", "rounds", "horizons", "caveat", "theorem_applies"}
_AGENT_KEYS = {"name", "kwargs", "label", "tasks", "reference", "theory_exponent"}


SHIPPED_SPECS = Path(__file__).resolve().parents[1] / "specs"
"""The folder of the specs shipped in the package (``leaderboard.toml``, the default suite)."""


class SpecError(ValueError):
    """A leaderboard spec is invalid; the message names the field and the bad value."""


def shipped_spec_names() -> list[str]:
    """Names of the specs shipped in the package (``"leaderboard"``), sorted."""
    return sorted(path.stem for path in SHIPPED_SPECS.glob("*.toml"))


def resolve_spec_path(path: str | Path) -> Path:
    """Return ``path`` if it exists, else the shipped spec it names (``"leaderboard"`` or ``"leaderboard.toml"``).

    A name that is neither an existing path nor a shipped spec is returned as it is (reading it then fails
    with a message that lists the shipped names).
    """
    path = Path(path)
    if path.exists() or path.name != str(path):
        return path
    shipped = SHIPPED_SPECS / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
    return shipped if shipped.is_file() else path


@dataclass(frozen=True)
class TaskEntry:
    """One ``[[task]]`` of a spec: a registered env id, its kwargs, a label, T, extra horizons, a caveat."""

    id: str
    kwargs: dict[str, Any]
    label: str
    rounds: int
    horizons: tuple[int, ...] = ()
    caveat: str = ""
    theorem_applies: bool = False


@dataclass(frozen=True)
class AgentEntry:
    """One ``[[agent]]`` of a spec: a registered agent name, its kwargs, a label, its tasks, how to report it."""

    name: str
    kwargs: dict[str, Any]
    label: str
    tasks: tuple[str, ...] | None
    reference: bool | None = None
    theory_exponent: float | None = None


@dataclass(frozen=True)
class LeaderboardSpec:
    """A validated spec; :meth:`runs` expands it into task x agent x seed runs."""

    rounds: int
    seeds: tuple[int, ...]
    tasks: tuple[TaskEntry, ...]
    agents: tuple[AgentEntry, ...]
    title: str = "tokenized-bandit-gym leaderboard"
    source: str = field(default="<spec>", compare=False)

    def runs(self) -> list[RunSpec]:
        """Every run, task-major then agent then horizon (T, then the extra horizons) then seed (a stable order)."""
        runs = []
        for task in self.tasks:
            for agent in self.agents:
                if agent.tasks is not None and task.label not in agent.tasks:
                    continue
                for rounds in (task.rounds, *task.horizons):
                    for seed in self.seeds:
                        runs.append(
                            RunSpec(
                                env_id=task.id,
                                env_kwargs=dict(task.kwargs),
                                agent=agent.name,
                                agent_kwargs=dict(agent.kwargs),
                                seed=seed,
                                rounds=rounds,
                                task_label=task.label,
                                agent_label=agent.label,
                            )
                        )
        return runs

    @property
    def text(self) -> str:
        """The spec file's text (empty when the spec was not read from a file or the file is gone)."""
        try:
            return Path(self.source).read_text(encoding="utf-8")
        except OSError:
            return ""


def as_runs(runs: object) -> list[RunSpec]:
    """The runs of ``runs``: a :class:`LeaderboardSpec` (its :meth:`~LeaderboardSpec.runs`) or RunSpecs.

    Raises:
        TypeError: anything else, named (``spec.runs`` without the call is the usual slip).
    """
    if isinstance(runs, LeaderboardSpec):
        return runs.runs()
    if callable(runs):
        raise TypeError(f"runs must be a list of RunSpec, got the callable {runs!r}: call it (spec.runs())")
    if isinstance(runs, (str, bytes, Mapping)) or not hasattr(runs, "__iter__"):
        raise TypeError(f"runs must be a list of RunSpec (e.g. spec.runs()) or a LeaderboardSpec, got {runs!r}")
    listed = list(runs)
    for position, run in enumerate(listed):
        if not isinstance(run, RunSpec):
            raise TypeError(f"runs[{position}] must be a RunSpec (e.g. from spec.runs()), got {run!r}")
    return listed


def load_spec(path: str | Path, check_registry: bool = True) -> LeaderboardSpec:
    """Read and validate a TOML spec file.

    Args:
        path: the ``.toml`` file, or the name of a spec shipped in the package (``"leaderboard"``).
        check_registry: also check env ids and agent names against the registries and build each
            env and agent once to validate their kwargs.

    Raises:
        SpecError: unreadable file, invalid TOML, or an invalid field (named with its value).
    """
    path = resolve_spec_path(path)
    try:
        if path.exists() and not path.is_file():
            raise SpecError(
                f"cannot read spec file {str(path)!r}: it is not a regular file (a folder or a device); "
                "a spec is a TOML file"
            )
        size = path.stat().st_size
        if size > SPEC_FILE_MAX_BYTES:
            raise SpecError(
                f"spec file {str(path)!r} is {size:,} bytes; a spec is a TOML file of a few kilobytes "
                f"(at most {SPEC_FILE_MAX_BYTES:,} bytes are read)"
            )
        _check_spec_memory(f"spec file {str(path)!r} of {size:,} bytes", size * SPEC_FILE_BYTES_PER_BYTE)
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(
            f"cannot read spec file {str(path)!r}: {error}{did_you_mean(path.stem, shipped_spec_names())} "
            f"(shipped specs, run by name: {shipped_spec_names()})"
        ) from error
    except UnicodeDecodeError as error:
        raise SpecError(
            f"spec file {str(path)!r} is not UTF-8 text (byte {error.object[error.start : error.start + 1]!r} at "
            f"offset {error.start}); a spec is a TOML file"
        ) from error
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"spec file {str(path)!r} is not valid TOML: {error}") from error
    except RecursionError as error:  # tomllib parses nested arrays and tables recursively
        raise SpecError(
            f"spec file {str(path)!r} nests arrays or tables too deeply to read (Python's recursion limit, "
            f"{sys.getrecursionlimit()}); a spec nests a few levels"
        ) from error
    return parse_spec(data, source=str(path), check_registry=check_registry)


def _check_spec_memory(what: str, needed_bytes: int) -> None:
    """:func:`~tokenized_bandit_gym.core.validation.check_memory`, raising :class:`SpecError`."""
    from tokenized_bandit_gym.core.validation import check_memory  # imports torch: not at `tbg --help`

    try:
        check_memory(what, needed_bytes)
    except ValueError as error:
        raise SpecError(str(error)) from error


def _check_int(where: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where} must be an integer, got {value!r}")
    if value < minimum:
        raise SpecError(f"{where} must be >= {minimum}, got {value!r}")
    return value


def _check_str(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _check_kwargs(where: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(f"{where} must be a table (e.g. {{ key = 1 }}), got {value!r}")
    _check_finite(where, value)
    return dict(value)


def _check_finite(where: str, value: object) -> None:
    """Reject NaN and infinities anywhere in a kwargs table (they cannot be hashed as JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{where} must not contain NaN or infinity, got {value!r}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(f"{where}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(f"{where}[{index}]", item)
    elif not isinstance(value, (str, int, float, bool)):
        raise SpecError(f"{where} must hold only strings, numbers, booleans, lists and tables, got {value!r}")


def _check_keys(where: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    for key in table:
        if key not in allowed:
            name = f"{where}.{key}" if where else key
            raise SpecError(
                f"unknown field {name!r} (value {table[key]!r}){did_you_mean(key, allowed)}; allowed: {sorted(allowed)}"
            )


def _default_label(name: str, kwargs: Mapping[str, Any]) -> str:
    if not kwargs:
        return name
    inside = ", ".join(f"{key}={kwargs[key]!r}" for key in sorted(kwargs))
    return f"{name}({inside})"


def _table_list(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    entries = data.get(key)
    if entries is None:
        raise SpecError(f"missing field {key!r}: add at least one [[{key}]] table")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{key} must be a non-empty list of [[{key}]] tables, got {entries!r}")
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise SpecError(f"{key}[{index}] must be a table, got {entry!r}")
    return entries


def _optional_bool(entry: Mapping[str, Any], where: str, key: str) -> bool | None:
    """``entry[key]``, true or false, or None when absent.

    Raises:
        SpecError: the value is not a TOML boolean (named with ``where``).
    """
    value = entry.get(key)
    if value is not None and not isinstance(value, bool):
        raise SpecError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _named_entry(
    where: str, entry: Mapping[str, Any], keys: set[str], name_field: str, meaning: str
) -> tuple[str, dict[str, Any], str]:
    """A task's or agent's entry ``where``: its name (the ``name_field`` it must have, ``meaning``), kwargs and label.

    Raises:
        SpecError: an unknown key, the missing ``name_field``, or a name, kwargs or label of the wrong type.
    """
    _check_keys(where, entry, keys)
    if name_field not in entry:
        raise SpecError(f"missing field '{where}.{name_field}' ({meaning})")
    name = _check_str(f"{where}.{name_field}", entry[name_field])
    kwargs = _check_kwargs(f"{where}.kwargs", entry.get("kwargs", {}))
    return name, kwargs, _check_str(f"{where}.label", entry.get("label", _default_label(name, kwargs)))


def parse_spec(data: Mapping[str, Any], source: str = "<spec>", check_registry: bool = True) -> LeaderboardSpec:
    """Validate a spec already parsed into a mapping (see the module docstring for the shape).

    Raises:
        SpecError: an invalid field, named with its value.
    """
    if not isinstance(data, Mapping):
        raise SpecError(f"a spec must be a table, got {data!r}")
    _check_keys("", data, _TOP_KEYS)
    title = _check_str("title", data.get("title", LeaderboardSpec.title))
    if "rounds" not in data:
        raise SpecError("missing field 'rounds' (the number of rounds T per run)")
    rounds = _check_int("rounds", data["rounds"], 1)
    _check_spec_memory(f"rounds={rounds} (the per-round arrays of one run)", rounds * ROUND_BYTES)
    if "seeds" not in data:
        raise SpecError("missing field 'seeds' (a list of seeds, or their number)")
    raw_seeds = data["seeds"]
    if isinstance(raw_seeds, int) and not isinstance(raw_seeds, bool):
        _check_spec_memory(f"seeds={raw_seeds} (one run per seed)", _check_int("seeds", raw_seeds, 1) * RUN_BYTES)
        seeds = tuple(range(raw_seeds))
    elif isinstance(raw_seeds, list) and raw_seeds:
        seeds = tuple(_check_int(f"seeds[{index}]", seed, 0) for index, seed in enumerate(raw_seeds))
        if len(set(seeds)) != len(seeds):
            raise SpecError(f"seeds must be distinct, got {raw_seeds!r}")
    else:
        raise SpecError(f"seeds must be a non-empty list of integers or a positive integer, got {raw_seeds!r}")

    tasks: list[TaskEntry] = []
    for index, entry in enumerate(_table_list(data, "task")):
        where = f"task[{index}]"
        env_id, kwargs, label = _named_entry(where, entry, _TASK_KEYS, "id", "a registered env id")
        task_rounds = _check_int(f"{where}.rounds", entry.get("rounds", rounds), 1)
        _check_spec_memory(f"{where}.rounds={task_rounds} (the per-round arrays of one run)", task_rounds * ROUND_BYTES)
        if label in {task.label for task in tasks}:
            raise SpecError(f"{where}.label {label!r} is used by another task; give each task its own label")
        for other, task in enumerate(tasks):
            if (task.id, canonical_json(task.kwargs), task.rounds) == (env_id, canonical_json(kwargs), task_rounds):
                raise SpecError(
                    f"{where} ({label!r}) is the same task as task[{other}] ({task.label!r}): same id {env_id!r}, "
                    f"kwargs {kwargs!r} and rounds {task_rounds}; their runs would be one. Remove one of them"
                )
        horizons = entry.get("horizons", [])
        if not isinstance(horizons, list):
            raise SpecError(f"{where}.horizons must be a list of integers below rounds, got {horizons!r}")
        for position, horizon in enumerate(horizons):
            _check_int(f"{where}.horizons[{position}]", horizon, 1)
            if horizon >= task_rounds or horizons.count(horizon) > 1:
                raise SpecError(
                    f"{where}.horizons[{position}] = {horizon!r} must be below rounds ({task_rounds}) and not repeated"
                )
        caveat = entry.get("caveat", "")
        if not isinstance(caveat, str):
            raise SpecError(f"{where}.caveat must be a string, got {caveat!r}")
        theorem_applies = bool(_optional_bool(entry, where, "theorem_applies"))
        tasks.append(
            TaskEntry(
                id=env_id,
                kwargs=kwargs,
                label=label,
                rounds=task_rounds,
                horizons=tuple(sorted(horizons)),
                caveat=caveat.strip(),
                theorem_applies=theorem_applies,
            )
        )

    task_labels = [task.label for task in tasks]
    agent_entries: list[AgentEntry] = []
    for index, entry in enumerate(_table_list(data, "agent")):
        where = f"agent[{index}]"
        name, kwargs, label = _named_entry(where, entry, _AGENT_KEYS, "name", "a registered agent name")
        if label in {agent.label for agent in agent_entries}:
            raise SpecError(f"{where}.label {label!r} is used by another agent; give each agent its own label")
        for other, agent in enumerate(agent_entries):
            if (agent.name, canonical_json(agent.kwargs)) == (name, canonical_json(kwargs)):
                raise SpecError(
                    f"{where} ({label!r}) is the same agent as agent[{other}] ({agent.label!r}): same name {name!r} "
                    f"and kwargs {kwargs!r}; their runs would be one. Remove one of them"
                )
        only = entry.get("tasks")
        if only is not None:
            if not isinstance(only, list) or not only:
                raise SpecError(f"{where}.tasks must be a non-empty list of task labels, got {only!r}")
            for position, task_label in enumerate(only):
                if task_label not in task_labels:
                    raise SpecError(
                        f"{where}.tasks[{position}] {task_label!r} is not a task label"
                        f"{did_you_mean(task_label, task_labels)}; labels: {task_labels}"
                    )
            only = tuple(only)
        reference = _optional_bool(entry, where, "reference")
        theory = entry.get("theory_exponent")
        if theory is not None and (
            isinstance(theory, bool) or not isinstance(theory, (int, float)) or not 0.0 <= theory <= 1.0
        ):
            raise SpecError(f"{where}.theory_exponent must be a number in [0, 1], got {theory!r}")
        agent_entries.append(
            AgentEntry(
                name=name,
                kwargs=kwargs,
                label=label,
                tasks=only,
                reference=reference,
                theory_exponent=None if theory is None else float(theory),
            )
        )

    runs = len(tasks) * len(agent_entries) * len(seeds)
    _check_spec_memory(
        f"{len(tasks)} tasks x {len(agent_entries)} agents x {len(seeds)} seeds = {runs:,} runs", runs * RUN_BYTES
    )
    spec = LeaderboardSpec(
        rounds=rounds, seeds=seeds, tasks=tuple(tasks), agents=tuple(agent_entries), title=title, source=source
    )
    if check_registry:
        _check_against_registries(spec)
    return spec


# canonical JSON of what was checked successfully in this process: (env id, kwargs) built, and
# (task, agent, first seed) started as a run starts
_VALID_ENVS: set[str] = set()
_VALID_PLAYERS: set[str] = set()


def _check_keywords(where: str, kwargs: Mapping[str, Any], target: Callable[..., Any], owner: str) -> None:
    """Refuse a keyword that ``target`` does not take (unless it takes ``**kwargs``), naming the closest ones."""
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): the call itself will tell
        return
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = sorted(parameter.name for parameter in parameters if parameter.kind in keyword)
    for key in kwargs:
        if key not in accepted:
            raise SpecError(
                f"{where} {dict(kwargs)!r} are invalid for {owner}: {key!r} is not one of its keywords"
                f"{did_you_mean(key, accepted)}; it takes {accepted}"
            )


def _named(label: str, name: str) -> str:
    return repr(label) if label == name else f"{label!r} ({name!r})"


def _check_against_registries(spec: LeaderboardSpec) -> None:
    """Check names against the registries, build every env and agent once, and start each agent on its tasks.

    Starting an agent on a task (its feedback check and ``reset``, as a run begins) is what refuses an
    agent that cannot play a task (EOFUL on a TMAB) here, before any run.
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    import tokenized_bandit_gym
    from tokenized_bandit_gym.core.tokenized_problem import TokenizedBanditProblem
    from tokenized_bandit_gym.evaluation.agent_support import one_line, reset_as_a_run_does
    from tokenized_bandit_gym.registration import AgentLoadError, is_agent_reference, list_agents, load_agent_class
    from tokenized_bandit_gym.task import Task

    agent_classes = []
    for index, entry in enumerate(spec.agents):
        if not is_agent_reference(entry.name):
            raise SpecError(
                f"agent[{index}].name {entry.name!r} is not a registered agent{did_you_mean(entry.name, list_agents())}"
                f"; registered: {list_agents()} (or give 'package.module:Class')"
            )
        try:
            agent_class = load_agent_class(entry.name)
        except AgentLoadError as error:
            raise SpecError(f"agent[{index}].name {entry.name!r} cannot be used: {error}") from error
        _check_keywords(f"agent[{index}].kwargs", entry.kwargs, agent_class, repr(entry.name))
        try:
            agent_class(**entry.kwargs)
        except (TypeError, ValueError) as error:
            raise SpecError(
                f"agent[{index}].kwargs {entry.kwargs!r} are invalid for {entry.name!r}: {error}"
            ) from error
        agent_classes.append(agent_class)
    for index, task in enumerate(spec.tasks):
        if task.id not in gym.registry:
            known = sorted(tokenized_bandit_gym.registered_ids())
            raise SpecError(
                f"task[{index}].id {task.id!r} is not a registered env id{did_you_mean(task.id, gym.registry)}; "
                f"registered: {known}"
            )
        entry_point = gym.spec(task.id).entry_point
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        if callable(creator):
            _check_keywords(f"task[{index}].kwargs", task.kwargs, creator, repr(task.id))
        identity = canonical_json([task.id, task.kwargs])
        players = []  # (agent index, agent entry, identity) of each agent playing this task not checked yet
        for agent_index, agent in enumerate(spec.agents):
            first_run = [task.id, task.kwargs, task.rounds, task.horizons, agent.name, agent.kwargs, spec.seeds[0]]
            if (agent.tasks is None or task.label in agent.tasks) and canonical_json(first_run) not in _VALID_PLAYERS:
                players.append((agent_index, agent, canonical_json(first_run)))
        if identity in _VALID_ENVS and not players:
            continue
        try:
            env = gym.make(task.id, **task.kwargs)
        except (TypeError, ValueError, gym.error.Error) as error:
            raise SpecError(f"task[{index}].kwargs {task.kwargs!r} are invalid for {task.id!r}: {error}") from error
        try:
            if not isinstance(getattr(env.unwrapped, "problem", None), TokenizedBanditProblem):
                known = sorted(tokenized_bandit_gym.registered_ids())
                raise SpecError(
                    f"task[{index}].id {task.id!r} is not a tokenized bandit env (it has no tokenized problem "
                    f"instance); the suite's ids: {known}"
                )
            render_modes = env.unwrapped.metadata.get("render_modes", [])
            render_mode = task.kwargs.get("render_mode")
            if render_mode is not None and render_mode not in render_modes:
                raise SpecError(
                    f"task[{index}].kwargs.render_mode {render_mode!r} is not supported by {task.id!r}: "
                    f"it renders {render_modes} (runs never render; leave render_mode out)"
                )
            _VALID_ENVS.add(identity)
            for agent_index, agent, identity_of_player in players:
                for horizon in (task.rounds, *task.horizons):
                    try:
                        reset_as_a_run_does(
                            agent_classes[agent_index](**agent.kwargs), Task.from_env(env, horizon), spec.seeds[0]
                        )
                    except Exception as error:  # noqa: BLE001  (what the agent raises here, its first run would raise)
                        raise SpecError(
                            f"agent[{agent_index}] {_named(agent.label, agent.name)} cannot play task[{index}] "
                            f"{_named(task.label, task.id)}: {one_line(error)}. `tbg list` shows the kinds of task "
                            f"each agent plays; name the tasks it can play in agent[{agent_index}].tasks"
                        ) from error
                _VALID_PLAYERS.add(identity_of_player)
        finally:
            env.close()
