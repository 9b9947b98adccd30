"""examples/reproduce_alignment.py on the shipped model with a tiny budget (theta fitted on HH-RLHF, cached in tmp)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.mark.slow
def test_reproduce_alignment_oracle_is_the_benchmark(
    load_script: Callable[[str], ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TBG_CACHE_DIR", str(tmp_path / "cache"))
    module = load_script("examples/reproduce_alignment.py")
    args = module.Args(
        model="stories260K", rounds=3, max_length=4, top_k=3, samples=1, seeds=(0, 1), out_dir=str(tmp_path / "out")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the fit on 260K parameters is not above chance: it warns
        results = module.main(args)
    for run in results["runs"]["args_oracle"].values():
        # reward-guided greedy is the env's benchmark: regret 0, to the rounding of the rows' batched forward
        assert run["regret"] == pytest.approx([0.0, 0.0, 0.0], abs=1e-4)
    assert results["summary"]["misaligned_greedy"]["ties"] == 1.0
    for summary in results["summary"].values():
        assert 0.0 <= summary["preferred"] + summary["ties"] <= 1.0
    assert 0.0 <= results["accuracy_interval"][0] <= results["held_out_accuracy"] <= results["accuracy_interval"][1]
    assert (tmp_path / "out" / "alignment.png").stat().st_size > 0
    stored = sorted(path.name for path in (tmp_path / "out" / "runs").iterdir())
    assert stored == sorted(f"{name}-seed{seed}.json" for name in module.LABELS for seed in (0, 1))
    played = []
    monkeypatch.setattr(module, "play_runs", lambda *arguments, **keywords: played.append(arguments))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        again = module.main(args)  # a rerun reads every finished run back and plays none
    assert played == [] and again["summary"] == results["summary"]
