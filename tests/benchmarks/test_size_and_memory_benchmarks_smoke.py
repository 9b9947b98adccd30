"""The size sweep compares equal decisions, and the memory benchmark counts what a run keeps, on tiny sizes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the sweep imports its NumPy loops from sequential_vs_numpy
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("agent", ["eoful", "tokenized_lin_ts", "greedy_ucb"])
@pytest.mark.parametrize("size", [{"vocab_size": 4, "embedding_dim": 3, "max_length": 3}, {"embedding_dim": 65}])
def test_size_sweep_times_loops_that_decide_alike(agent: str, size: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = _load("linear_agents_size_sweep", monkeypatch)
    rounds, package, reference = sweep.measure(agent, {**sweep.DEFAULT_SIZE, **size}, repeats=1, seconds=0.0)
    assert rounds >= 20 and package > 0 and reference > 0  # measure() raises if the regrets differ


@pytest.mark.slow  # tracemalloc's kept bytes depend on what earlier tests of the same process allocated
def test_memory_benchmark_counts_the_result_columns_and_the_ratios(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = _load("memory_per_round", monkeypatch)
    size = {"vocab_size": 4, "embedding_dim": 4, "max_length": 2}
    for record_ratios in (False, True):  # first-use allocations of each configuration, kept by the first run only
        memory.kept_bytes(50, record_ratios, size)
    plain, _ = memory.kept_bytes(400, False, size)
    with_ratios, _ = memory.kept_bytes(400, True, size)
    assert plain >= 400 * 48  # the six float64 result columns at least
    assert with_ratios - plain >= 400 * 32 * 0.9  # the four float64 ratios a round, on request
