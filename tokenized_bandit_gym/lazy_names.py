"""Names a package exports without importing their modules until first use (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
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
