"""The docs site's generated reference pages list every registered id and agent, and the docstrings render.

Needs the ``docs`` extra (griffe); skipped without it. The site's own build (``mkdocs build --strict`` in CI)
checks every link and anchor of the pages.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym.registration import list_agents

pytest.importorskip("griffe")
DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture
def reference_pages(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(DOCS))
    return importlib.import_module("reference_pages")


def test_the_env_page_has_every_id_with_its_own_defaults(reference_pages: ModuleType) -> None:
    page = reference_pages.env_reference()
    assert re.findall(r"^## `(.+)`$", page, re.M) == tokenized_bandit_gym.registered_ids()
    needle = page[page.index("## `TokenizedLinearBanditNeedle-v0`") :]
    assert "| `family` | **`'needle'`** |" in needle  # the id's registered keyword, not the class default


def test_the_agent_page_says_what_each_agent_plays_and_why_not(reference_pages: ModuleType) -> None:
    page = reference_pages.agent_reference()
    rows = dict(re.findall(r"^\| `(\w+)` \| \[`\w+`\]\([^)]+\) \| ([^|]+) \|", page, re.M))
    assert set(rows) == set(list_agents())
    assert rows["eoful"].strip() == "linear, LLM"
    assert "- `eoful`, not TMAB: needs candidate embeddings" in page


def test_every_public_module_has_an_api_block(reference_pages: ModuleType) -> None:
    blocks = [
        line[4:]
        for page in reference_pages.API_SECTIONS
        for line in reference_pages.api_page(page).splitlines()
        if line.startswith("::: ")
    ]
    assert "tokenized_bandit_gym.envs.tokenized_linear_bandit_env" in blocks
    assert "agents.eoful" in blocks
    assert not [module for module in blocks if any(part.startswith("_") for part in module.split("."))]
    assert len(blocks) == len(set(blocks))


def test_docstrings_render_doctests_as_code_and_roles_as_inline_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DOCS))
    markdown = importlib.import_module("griffe_markdown")
    text = "See :class:`~pkg.mod.Thing` and :func:`pkg.run`.\n\n>>> 1 + 1\n2\n\nAfter."
    assert markdown.as_markdown(text) == "See `Thing` and `pkg.run`.\n\n```pycon\n>>> 1 + 1\n2\n```\n\nAfter."
