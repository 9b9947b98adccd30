"""The store chaos script (3 `tbg run`s on one store under random signals) holds with a few signals."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.mark.slow
def test_store_chaos_with_a_few_signals_stores_every_run_once_and_byte_identical(
    load_script: Callable[[str], ModuleType],
) -> None:
    module = load_script("benchmarks/store_chaos.py")
    result = module.main(module.Args(signals=6, startup_signals=4, rounds=100, seed=1))
    assert sum(result.signals.values()) == 10 and result.startup_signals == 4
    assert result.runs_expected == 12 and result.runs_stored == 12 and result.array_rows == 72
    assert result.verify_ok and result.identical, result.verify
    assert result.unclear_exits == []
