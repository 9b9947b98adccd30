"""Names a package exports without importing their modules until first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


def lazy_attribute(package: str, modules: dict[str, str], name: str) -> Any:
    """``name`` from ``package.<modules[name]>``, imported now; the body of a package's ``__getattr__``.

    Args:
        package: the package's ``__name__``.
        modules: exported name -> the submodule (relative to ``package``) that defines it, or a module's full
            dotted name when it lives in another package (a name that starts with ``tokenized_bandit_gym.``).
        name: the attribute asked for.

    Raises:
        AttributeError: ``name`` is not in ``modules``.
    """
    if name not in modules:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module = modules[name]
    if not module.startswith("tokenized_bandit_gym."):
        module = f"{package}.{module}"
    return getattr(importlib.import_module(module), name)


def keep_names_over_submodules(package: str, modules: dict[str, str]) -> None:
    """Make ``package`` keep an exported name bound to the name, not to the submodule of the same name.

    Importing a submodule binds it on its package under its own name, which would hide the function of
    the same name that the submodule defines (``llm.load_language_model``, ``evaluation.run_online``);
    the package's class is swapped for one that binds the function instead.

    Args:
        package: the package's ``__name__``.
        modules: the package's lazy table, as for :func:`lazy_attribute`.
    """

    class _Package(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if modules.get(name) == name and isinstance(value, types.ModuleType):
                value = getattr(value, name)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = _Package
