"""Names a package exports without importing their modules until first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
from typing import Any


def lazy_attribute(package: str, modules: dict[str, str], name: str) -> Any:
    """``name`` from ``package.<modules[name]>``, imported now; the body of a package's ``__getattr__``.

    Args:
        package: the package's ``__name__``.
        modules: exported name -> the submodule (relative to ``package``) that defines it.
        name: the attribute asked for.

    Raises:
        AttributeError: ``name`` is not in ``modules``.
    """
    if name not in modules:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
