"""Evaluation: the online run loop, leaderboard specs, the results store, statistics, reports, ``tbg``.

Every name loads lazily (``from tokenized_bandit_gym.evaluation import load_spec``), so importing a
module of this package (the ``tbg`` CLI, for one) imports no torch, SciPy or matplotlib until it is used.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from tokenized_bandit_gym.lazy_names import lazy_attribute

_LAZY = {
    "OnlineResult": "online_result",
    "run_online": "run_online",
    "run_online_vector": "run_online_vector",
    "vector_task": "run_online_vector",
    "LeaderboardSpec": "leaderboard_spec",
    "SpecError": "leaderboard_spec",
    "load_spec": "leaderboard_spec",
    "parse_spec": "leaderboard_spec",
    "RunSpec": "run_spec",
    "RunRecord": "run_record",
    "ResultsStore": "results_store",
    "StoreError": "results_store",
    "run_leaderboard": "leaderboard_runner",
    "Leaderboard": "leaderboard",
    "build_leaderboard": "leaderboard",
    "markdown_report": "leaderboard_report",
    "write_report": "leaderboard_report",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


class _Package(types.ModuleType):
    """This package, whose ``run_online`` and ``run_online_vector`` stay functions once their modules are imported.

    Importing a submodule binds it on its package under its own name, which would hide the function
    of the same name that the submodule defines; the function is bound instead.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if _LAZY.get(name) == name and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
