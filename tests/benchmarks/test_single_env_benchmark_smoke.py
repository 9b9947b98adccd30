"""The single-env episode benchmark runs with a tiny budget."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_single_env_benchmark_reports_every_synthetic_id(load_script: Callable[[str], ModuleType]) -> None:
    module = load_script("benchmarks/single_env_episode.py")
    rows = module.main(module.Args(episodes=2, chunks=2, threads=1))
    assert [row[0] for row in rows] == list(module.SYNTHETIC_ENVS)
    assert all(made > 0 and unwrapped > 0 and operations > 0 for _, made, unwrapped, _, operations in rows)
