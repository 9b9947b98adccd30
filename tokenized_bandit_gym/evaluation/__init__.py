"""Evaluation: the online run loop, leaderboard specs, the results store, statistics, reports, ``tbg``.

Every name loads lazily (``from tokenized_bandit_gym.evaluation import load_spec``), so importing a
module of this package (the ``tbg`` CLI, for one) imports no torch, SciPy or matplotlib until it is used.
"""

from __future__ import annotations

from typing import Any

from tokenized_bandit_gym.lazy_names import keep_names_over_submodules, lazy_attribute

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
    "Claim": "leaderboard_claims",
    "markdown_report": "leaderboard_report",
    "write_report": "leaderboard_report",
    "plotted_leaderboard": "leaderboard_report",
    "code_version": "provenance",
    "Yardstick": "yardstick",
    "measure_yardstick": "yardstick",
    "yardstick_line": "yardstick",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


keep_names_over_submodules(__name__, _LAZY)
