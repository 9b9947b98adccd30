"""The docs site's reference pages, generated from the registry and the source tree at every build.

``docs/hooks.py`` (an MkDocs hook) adds each page of :data:`PAGES` to the site; nothing here is written to disk,
so the pages cannot go stale. The env page lists every registered id with its keywords and their defaults for
that id, the agent page every registered agent with the kinds of task it plays and why not the others (the
answers ``tbg list`` prints), and the API pages one mkdocstrings block per public module.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path

from griffe_markdown import roles_as_code

import tokenized_bandit_gym  # noqa: F401  (registers the env ids the pages list)
from tokenized_bandit_gym.evaluation.agent_support import TASK_KINDS, agent_support_table
from tokenized_bandit_gym.registration import (
    AGENT_ENTRY_POINTS,
    LLM_ENVS,
    SYNTHETIC_ENVS,
    VECTOR_ENTRY_POINTS,
    load_agent_class,
)

REPO_ROOT = Path(__file__).resolve().parents[1]

API_SECTIONS: dict[str, tuple[str, Path]] = {
    "package": ("tokenized_bandit_gym", REPO_ROOT / "tokenized_bandit_gym"),
    "core": ("tokenized_bandit_gym.core", REPO_ROOT / "tokenized_bandit_gym" / "core"),
    "envs": ("tokenized_bandit_gym.envs", REPO_ROOT / "tokenized_bandit_gym" / "envs"),
    "llm": ("tokenized_bandit_gym.llm", REPO_ROOT / "tokenized_bandit_gym" / "llm"),
    "wrappers": ("tokenized_bandit_gym.wrappers", REPO_ROOT / "tokenized_bandit_gym" / "wrappers"),
    "adapters": ("tokenized_bandit_gym.adapters", REPO_ROOT / "tokenized_bandit_gym" / "adapters"),
    "evaluation": ("tokenized_bandit_gym.evaluation", REPO_ROOT / "tokenized_bandit_gym" / "evaluation"),
    "agents": ("agents", REPO_ROOT / "agents"),
}
"""API page name -> (the dotted package it documents, the folder its modules are in). The agents install as
``tokenized_bandit_gym.agents`` from the top-level ``agents/`` folder, which the static loader reads as ``agents``."""


def _load(entry_point: str) -> type:
    module_name, _, attribute = entry_point.partition(":")
    module = __import__(module_name, fromlist=[attribute])
    return getattr(module, attribute)


def _summary(cls: type) -> str:
    """The first line of ``cls``'s docstring, as Markdown (empty when it has none)."""
    lines = (inspect.getdoc(cls) or "").strip().splitlines()
    return roles_as_code(lines[0]).replace("``", "`") if lines else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _api_anchor(dotted: str) -> str:
    """The link to ``dotted`` (``package.module.Class``) on its API page (mkdocstrings anchors by full name)."""
    package = next(
        page
        for page, (prefix, _) in sorted(API_SECTIONS.items(), key=lambda item: -len(item[1][0]))
        if dotted.startswith(prefix + ".")
    )
    return f"api/{package}.md#{dotted}"


def _keywords(cls: type) -> list[tuple[str, object, str]]:
    """``(keyword, default, type)`` of each keyword ``gym.make`` passes to ``cls``.

    A synthetic env's keywords are its config's (``config_class.keyword_defaults()``: the fields,
    ``family`` by name, and the options of the families of its kind, None meaning the family's own
    default); an LLM env's are its config's too (``keyword_defaults()`` and ``keyword_types()``: the fields
    of its parts, by name).
    """
    rows: list[tuple[str, object, str]] = []
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = "" if parameter.annotation is inspect.Parameter.empty else str(parameter.annotation)
        rows.append((name, parameter.default, annotation))
    config_class = getattr(cls, "config_class", None)
    if config_class is not None:
        types = {item.name: str(item.type) for item in dataclasses.fields(config_class)}
        types.update(getattr(config_class, "keyword_types", dict)())
        for name, default in config_class.keyword_defaults().items():
            rows.append((name, default, "str" if name == "family" else types.get(name, "family option")))
    return rows


def env_reference() -> str:
    """Every registered id: its class, its vector env, and each constructor keyword with its default for that id."""
    lines = [
        "# Env reference",
        "",
        "Generated from the registry (`tokenized_bandit_gym/registration.py`) at every build: every id with the",
        "keyword arguments `gym.make(id, **kwargs)` takes and their defaults for that id (the id's own registered",
        "values in bold). What a round reports is in [Environments](../ENVIRONMENTS.md).",
        "",
    ]
    for env_id, (entry_point, id_kwargs) in {**SYNTHETIC_ENVS, **LLM_ENVS}.items():
        cls = _load(entry_point)
        dotted = f"{cls.__module__}.{cls.__qualname__}"
        vector = VECTOR_ENTRY_POINTS.get(entry_point)
        lines += [f"## `{env_id}`", "", _summary(cls), ""]
        lines.append(f"Class: [`{dotted}`]({_api_anchor(dotted)}).")
        if vector is not None:
            lines.append(f"Native vector env (`gym.make_vec`): `{vector.replace(':', '.')}`.")
        if env_id in LLM_ENVS:
            lines.append("Loads a causal LM when made (default: the shipped stories260K).")
        lines += ["", "| keyword | default | type |", "|---|---|---|"]
        for name, class_default, annotation in _keywords(cls):
            if name in id_kwargs:
                default = f"**`{id_kwargs[name]!r}`**"
            elif class_default is inspect.Parameter.empty:
                default = "(required)"
            else:
                default = f"`{class_default!r}`"
            lines.append(f"| `{name}` | {_cell(default)} | {_cell(f'`{annotation}`' if annotation else '')} |")
        lines.append("")
    return "\n".join(lines)


def agent_reference() -> str:
    """Every registered agent: its class, and the kinds of task it plays and why not the others."""
    kinds = ", ".join(f"{kind} (`{env_id}`)" for kind, env_id in TASK_KINDS.items())
    lines = [
        "# Agent reference",
        "",
        "Generated from the registry at every build: every name `agents.make(name)` and a spec's `[[agent]]` take,",
        f"and the kinds of task it plays: {kinds}. For the others it says why not, as `tbg list` does",
        "(a test checks these answers against what each agent's `reset` raises). Writing your own agent is in",
        "[Agents](../AGENTS.md#your-own-agent).",
        "",
        "| agent | class | plays | summary |",
        "|---|---|---|---|",
    ]
    reasons = []
    for support in agent_support_table(list(AGENT_ENTRY_POINTS)):
        cls = load_agent_class(support.name)
        dotted = f"agents.{cls.__module__.rpartition('.')[2]}.{cls.__qualname__}"
        plays = ", ".join(support.supported) or "none of the three"
        lines.append(
            f"| `{support.name}` | [`{cls.__qualname__}`]({_api_anchor(dotted)}) | {plays} | {_cell(_summary(cls))} |"
        )
        reasons += [f"- `{support.name}`, not {kind}: {reason}" for kind, reason in support.reasons.items() if reason]
    lines += ["", "## Why not", "", *reasons, ""]
    return "\n".join(lines)


def _public_modules(package: str, folder: Path) -> list[str]:
    """The dotted names of ``folder``'s public modules, its subpackages' included, sorted."""
    modules = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        if any(part.startswith("_") for part in parts if part != "__init__"):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if package == "tokenized_bandit_gym" and parts and (folder / parts[0]).is_dir():
            continue  # a subpackage of the top level has a page of its own
        modules.append(".".join((package, *parts)))
    return modules


def api_page(page: str) -> str:
    """One API page: a mkdocstrings block (``::: module``) for each public module of ``page``'s package."""
    package, folder = API_SECTIONS[page]
    title = "tokenized_bandit_gym.agents" if package == "agents" else package
    blocks = [f"# `{title}`", ""]
    for module in _public_modules(package, folder):
        blocks += [f"::: {module}", ""]
    return "\n".join(blocks)


PAGES: dict[str, Callable[[], str]] = {
    "reference/envs.md": env_reference,
    "reference/agents.md": agent_reference,
    **{f"reference/api/{page}.md": (lambda page=page: api_page(page)) for page in API_SECTIONS},
}
"""Each generated page's path under ``docs/`` -> what writes its Markdown."""
