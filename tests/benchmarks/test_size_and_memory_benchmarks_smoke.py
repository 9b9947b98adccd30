"""The size sweep compares equal decisions, and the memory benchmark counts what a run keeps, on tiny sizes."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.mark.parametrize("agent", ["eoful", "tokenized_lin_ts", "greedy_ucb", "lookahead_eoful"])
@pytest.mark.parametrize("size", [{"vocab_size": 4, "embedding_dim": 3, "max_length": 3}, {"embedding_dim": 65}])
def test_size_sweep_times_loops_that_decide_alike(
    load_script: Callable[[str], ModuleType], agent: str, size: dict
) -> None:
    sweep = load_script("benchmarks/linear_agents_size_sweep.py")
    rounds, package, reference = sweep.measure(agent, {**sweep.DEFAULT_SIZE, **size}, repeats=1, seconds=0.0)
    assert rounds >= 20 and package > 0 and reference > 0  # measure() raises if the regrets differ


@pytest.mark.slow  # tracemalloc's kept bytes depend on what earlier tests of the same process allocated
def test_memory_benchmark_counts_the_result_columns_and_the_ratios(load_script: Callable[[str], ModuleType]) -> None:
    memory = load_script("benchmarks/memory_per_round.py")
    size = {"vocab_size": 4, "embedding_dim": 4, "max_length": 2}
    for record_ratios in (False, True):  # first-use allocations of each configuration, kept by the first run only
        memory.kept_bytes(50, record_ratios, size)
    plain, _ = memory.kept_bytes(400, False, size)
    with_ratios, _ = memory.kept_bytes(400, True, size)
    assert plain >= 400 * 48  # the six float64 result columns at least
    assert with_ratios - plain >= 400 * 32 * 0.9  # the four float64 ratios a round, on request
