"""The single-env episode benchmark runs with a tiny budget."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "single_env_episode.py"


def test_single_env_benchmark_reports_every_synthetic_id() -> None:
    spec = importlib.util.spec_from_file_location("single_env_episode", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["single_env_episode"] = module
    spec.loader.exec_module(module)
    rows = module.main(module.Args(episodes=2, chunks=2, threads=1))
    assert [row[0] for row in rows] == list(module.SYNTHETIC_ENVS)
    assert all(made > 0 and unwrapped > 0 and operations > 0 for _, made, unwrapped, _, operations in rows)
