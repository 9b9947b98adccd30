"""Evaluation: the online run loop, leaderboard specs, the results store, statistics, reports, ``tbg``.

The leaderboard names load lazily (``from tokenized_bandit_gym.evaluation import load_spec``), so
importing the run loop does not import SciPy or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

from tokenized_bandit_gym.evaluation.online_result import OnlineResult
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.evaluation.run_online_vector import run_online_vector, vector_task

_LAZY = {
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

__all__ = ["OnlineResult", "run_online", "run_online_vector", "vector_task", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
