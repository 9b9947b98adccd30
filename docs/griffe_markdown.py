"""Griffe extension: render the docstrings' reStructuredText bits as Markdown on the docs site.

The docstrings are Google style with Sphinx roles (``:class:`~pkg.Class```) and doctests. The env classes'
docstrings are their documentation pages (Gymnasium's layout: ``## Arguments`` and so on, each with a doctest
that ``tests/envs/test_docstring_examples.py`` runs). Before mkdocstrings renders a docstring (the source stays as
it is):

- each doctest example, from its first ``>>>`` line to the blank line that ends it (doctest's own rule), is
  fenced as ``pycon``, which Markdown would otherwise run together into one paragraph;
- each role becomes inline code naming its target (the last part after ``~``, as Sphinx shows it).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^([ \t]*)>>> .*?(?=^\s*$|\Z)", flags=re.M | re.S)
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj|exc|const|py:\w+):`(~?)([^`]+)`")


def fence_doctests(text: str) -> str:
    """``text`` with every doctest example fenced as ``pycon`` (at the example's own indentation)."""

    def fence(match: re.Match[str]) -> str:
        indent = match.group(1)
        return f"{indent}```pycon\n{match.group(0).rstrip()}\n{indent}```\n"

    return _EXAMPLE.sub(fence, text)


def roles_as_code(text: str) -> str:
    """``text`` with every Sphinx role (``:class:`~a.b.C```) as inline code (`` `C` ``; `` `a.b.C` `` without ``~``)."""
    return _ROLE.sub(lambda match: f"`{match.group(2).rpartition('.')[2] if match.group(1) else match.group(2)}`", text)


def as_markdown(text: str) -> str:
    """A docstring's text as the site renders it: roles as inline code, doctests fenced."""
    return fence_doctests(roles_as_code(text))


class DocstringsAsMarkdown(griffe.Extension):
    """Apply :func:`as_markdown` to every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring (module, class, function or attribute) once it is loaded."""
        if obj.docstring is not None:
            obj.docstring.value = as_markdown(obj.docstring.value)
